// serve-bench: drives a running gemm-server through libgemm_client and
// writes what it saw as JSON.
//
//   --mode batching: --streams concurrent GemmStreams (one thread each),
//     each keeping --depth jobs of --size^3 in flight for --seconds. Reports
//     requests/s, latency percentiles, the batch sizes the server formed
//     and the GPU-side throughput: jobs per second of device compute time,
//     where a batch's compute time is shared by its batch_size jobs.
//   --mode single: --reps jobs of --size^3, one at a time; reports the
//     server's timing breakdown beside the client's wall time and the bytes
//     moved each way.
//
//   serve-bench --target 127.0.0.1:50051 --mode batching --size 128
//       --streams 64 --seconds 10 --out batching-on.json    (one line)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "client/lib/gemm_client.h"
#include "common/reference_gemm.h"
#include "nlohmann/json.hpp"

namespace {

using gemm::client::GemmArgs;
using gemm::client::GemmClient;
using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

struct Sample {
  double latency_ms;
  gemm::v1::Timing timing;
};

int RunBatching(GemmClient& client, uint32_t size, int streams, int depth,
                double seconds, const std::string& kernel, std::string* json) {
  const uint64_t elements = uint64_t{size} * size;
  std::vector<float> a(elements), b(elements);
  gemm::FillRandom(a.data(), a.size(), 1);
  gemm::FillRandom(b.data(), b.size(), 2);
  absl::Mutex mu;
  std::vector<Sample> samples;
  std::atomic<int> errors{0};
  std::string first_error;
  const auto start = Clock::now();
  const auto stop = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int s = 0; s < streams; ++s) {
    threads.emplace_back([&, s] {
      std::vector<std::vector<float>> outs(depth, std::vector<float>(elements));
      auto stream = client.OpenStream();
      while (Clock::now() < stop) {
        absl::BlockingCounter done(depth);
        for (int d = 0; d < depth; ++d) {
          GemmArgs args{.problem = {size, size, size},
                        .kernel = kernel,
                        .a = a.data(),
                        .b = b.data()};
          const auto sent = Clock::now();
          stream->Submit(args, outs[d].data(),
                         [&, sent](absl::StatusOr<gemm::v1::Timing> t) {
                           const double ms =
                               std::chrono::duration<double, std::milli>(
                                   Clock::now() - sent)
                                   .count();
                           absl::MutexLock lock(&mu);
                           if (t.ok()) {
                             samples.push_back({ms, *t});
                           } else {
                             if (errors++ == 0)
                               first_error = t.status().ToString();
                           }
                           done.DecrementCount();
                         });
        }
        done.Wait();
      }
      (void)stream->Finish();
      (void)s;
    });
  }
  for (auto& t : threads) t.join();
  const double wall =
      std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> latency;
  double gpu_ms = 0, batch_sum = 0, h2d = 0, d2h = 0, compute = 0, queue = 0;
  for (const Sample& s : samples) {
    latency.push_back(s.latency_ms);
    const double bs = std::max<uint32_t>(1, s.timing.batch_size());
    gpu_ms += s.timing.compute_ms() / bs;
    batch_sum += bs;
    h2d += s.timing.h2d_ms();
    d2h += s.timing.d2h_ms();
    compute += s.timing.compute_ms();
    queue += s.timing.queue_ms();
  }
  const double n = std::max<size_t>(1, samples.size());
  const double flops = 2.0 * size * size * size;
  const double gpu_jobs_per_s = samples.size() / (gpu_ms / 1e3);
  *json =
      nlohmann::ordered_json{
          {"mode", "batching"},
          {"size", size},
          {"streams", streams},
          {"depth", depth},
          {"kernel", kernel},
          {"seconds", wall},
          {"jobs", samples.size()},
          {"errors", errors.load()},
          {"first_error", first_error},
          {"requests_per_s", samples.size() / wall},
          {"client_gflops", samples.size() * flops / wall / 1e9},
          {"latency_ms",
           {{"p50", Percentile(latency, 0.5)},
            {"p90", Percentile(latency, 0.9)},
            {"p99", Percentile(latency, 0.99)}}},
          {"mean_batch_size", batch_sum / n},
          {"mean_queue_ms", queue / n},
          {"mean_h2d_ms", h2d / n},
          {"mean_compute_ms", compute / n},
          {"mean_d2h_ms", d2h / n},
          {"gpu_compute_ms_total", gpu_ms},
          {"gpu_jobs_per_s", gpu_jobs_per_s},
          {"gpu_gflops", gpu_jobs_per_s * flops / 1e9},
          {"device", samples.empty() ? "" : samples.front().timing.device()},
      }
          .dump();
  return errors.load() == 0 ? 0 : 1;
}

int RunSingle(GemmClient& client, uint32_t size, int reps,
              const std::string& kernel, std::string* json) {
  const uint64_t elements = uint64_t{size} * size;
  std::vector<float> a(elements), b(elements), c(elements);
  gemm::FillRandom(a.data(), a.size(), 1);
  gemm::FillRandom(b.data(), b.size(), 2);
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  int failures = 0;
  for (int r = 0; r < reps; ++r) {
    GemmArgs args{.problem = {size, size, size},
                  .kernel = kernel,
                  .a = a.data(),
                  .b = b.data()};
    const auto sent = Clock::now();
    auto t = client.Gemm(args, c.data());
    const double ms =
        std::chrono::duration<double, std::milli>(Clock::now() - sent).count();
    if (!t.ok()) {
      ++failures;
      std::fprintf(stderr, "job failed: %s\n", t.status().ToString().c_str());
      continue;
    }
    runs.push_back({{"client_ms", ms},
                    {"server_ms", t->server_ms()},
                    {"queue_ms", t->queue_ms()},
                    {"h2d_ms", t->h2d_ms()},
                    {"compute_ms", t->compute_ms()},
                    {"d2h_ms", t->d2h_ms()},
                    {"kernel", t->kernel()},
                    {"device", t->device()},
                    {"gflops", t->gflops()}});
  }
  const uint64_t in_bytes = 2 * 4 * elements, out_bytes = 4 * elements;
  *json = nlohmann::ordered_json{
      {"mode", "single"},
      {"size", size},
      {"bytes_to_server", in_bytes},
      {"bytes_from_server", out_bytes},
      {"bytes_h2d", in_bytes},
      {"bytes_d2h", out_bytes},
      {"runs",
       runs}}.dump();
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string target = "127.0.0.1:50051", mode = "batching", out,
              kernel = "auto";
  uint32_t size = 128;
  int streams = 64, depth = 1, reps = 3;
  double seconds = 10;
  CLI::App app{"serve-bench: load a gemm-server and record what it did"};
  app.add_option("--target", target)->capture_default_str();
  app.add_option("--mode", mode, "batching or single")->capture_default_str();
  app.add_option("--size", size, "M = N = K")->capture_default_str();
  app.add_option("--streams", streams, "concurrent GemmStreams")
      ->capture_default_str();
  app.add_option("--depth", depth, "jobs in flight per stream")
      ->capture_default_str();
  app.add_option("--seconds", seconds)->capture_default_str();
  app.add_option("--reps", reps, "jobs in single mode")->capture_default_str();
  app.add_option("--kernel", kernel)->capture_default_str();
  app.add_option("--out", out, "JSON file (default: stdout only)");
  CLI11_PARSE(app, argc, argv);

  GemmClient::Options options;
  options.target = target;
  auto client = GemmClient::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 2;
  }
  std::string json;
  const int rc =
      mode == "single"
          ? RunSingle(**client, size, reps, kernel, &json)
          : RunBatching(**client, size, streams, depth, seconds, kernel, &json);
  std::printf("%s\n", json.c_str());
  if (!out.empty()) std::ofstream(out) << json << "\n";
  return rc;
}
