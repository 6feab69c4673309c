// example: the three ways to call libgemm_client, in a dozen lines each.
//
//   bazel run //client/lib:example -- localhost:50051
//   bazel run //client/lib:example -- host1:50051,host2:50051   (round robin)
#include <atomic>
#include <cstdio>
#include <vector>

#include "absl/strings/str_split.h"
#include "client/lib/gemm_client.h"
#include "common/reference_gemm.h"

int main(int argc, char** argv) {
  using gemm::client::GemmArgs;
  using gemm::client::GemmClient;

  GemmClient::Options options;
  options.targets = absl::StrSplit(argc > 1 ? argv[1] : "localhost:50051", ',');
  options.timeout = absl::Seconds(30);  // deadline of each call
  options.retry.max_attempts = 4;       // resend on UNAVAILABLE, with backoff
  auto client = GemmClient::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }

  // Operands are the caller's; C lands in the caller's buffer.
  const uint32_t m = 256, n = 192, k = 128;
  std::vector<float> a(m * k), b(k * n), c(m * n);
  gemm::FillRandom(a.data(), a.size(), 1);
  gemm::FillRandom(b.data(), b.size(), 2);
  GemmArgs args{
      .problem = {.m = m, .n = n, .k = k}, .a = a.data(), .b = b.data()};

  // 1. Synchronous.
  auto timing = (*client)->Gemm(args, c.data());
  if (!timing.ok()) {
    std::fprintf(stderr, "Gemm: %s\n", timing.status().ToString().c_str());
    return 1;
  }
  std::printf("sync:   %s on %s, compute %.3f ms, server %.3f ms\n",
              timing->kernel().c_str(), timing->device().c_str(),
              timing->compute_ms(), timing->server_ms());

  // 2. A future (GemmAsync takes a callback instead).
  std::vector<float> c2(m * n);
  auto future = (*client)->GemmFuture(args, c2.data());
  std::printf("future: %s\n", future.get().ok() ? "OK" : "failed");

  // 3. Many jobs pipelined on one stream; callbacks run on gRPC threads.
  std::vector<std::vector<float>> outs(8, std::vector<float>(m * n));
  std::atomic<int> ok{0};
  auto stream = (*client)->OpenStream();
  for (auto& out : outs) {
    stream->Submit(args, out.data(), [&ok](absl::StatusOr<gemm::v1::Timing> t) {
      if (t.ok()) ++ok;
    });
  }
  absl::Status finished = stream->Finish();  // waits for every job
  std::printf("stream: %d of %zu OK via %s (%s)\n", ok.load(), outs.size(),
              stream->target().c_str(), finished.ToString().c_str());
  return ok == static_cast<int>(outs.size()) ? 0 : 1;
}
