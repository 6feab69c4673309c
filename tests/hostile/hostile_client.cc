#include "tests/hostile/hostile_client.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/time/time.h"
#include "common/wait_until.h"
#include "gtest/gtest.h"
#include "tests/metrics_scrape.h"

namespace gemm::testing {

v1::GemmRequest Request(uint32_t m, uint32_t n, uint32_t k,
                        const std::string& kernel) {
  v1::GemmRequest request;
  v1::GemmParams* params = request.mutable_params();
  params->set_m(m);
  params->set_n(n);
  params->set_k(k);
  params->set_alpha(1);
  params->set_kernel(kernel);
  std::vector<float> a(uint64_t{m} * k, 0.5f), b(uint64_t{k} * n, 0.25f);
  request.set_a(a.data(), 4 * a.size());
  request.set_b(b.data(), 4 * b.size());
  return request;
}

// A path in the test's temporary folder, no file there yet.
std::string FreshTestFile(const std::string& name) {
  const char* folder = getenv("TEST_TMPDIR");
  const std::string path =
      std::string(folder != nullptr ? folder : "/tmp") + "/" + name;
  std::remove(path.c_str());
  return path;
}

// Info on a new connection to `target`.
grpc::Status CallInfo(const std::string& target, std::chrono::seconds timeout) {
  auto stub = v1::GemmService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::InfoRequest request;
  v1::InfoResponse response;
  return stub->Info(&context, request, &response);
}

// Each connection can hold a connection window of data the server has not
// asked for (several MiB with BDP probing), so 120 connections of one
// client with unfinished unary calls filled a 256 MiB quota, which then
// cancelled other clients' calls. By default one client keeps 32.
v1::StreamRequest Declare(uint64_t id, uint32_t m, uint32_t n, uint32_t k) {
  v1::StreamRequest request;
  request.set_job_id(id);
  v1::GemmParams* params = request.mutable_params();
  params->set_m(m);
  params->set_n(n);
  params->set_k(k);
  params->set_alpha(1);
  return request;
}

// Jobs of 64^3 on a new connection to `target`, one at a time, each with a
// 5 s deadline; the number that succeeded.
int VictimJobs(const std::string& target, int jobs) {
  auto stub = v1::GemmService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  int ok = 0;
  for (int i = 0; i < jobs; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
    v1::GemmResponse response;
    const grpc::Status status =
        stub->Gemm(&context, Request(64, 64, 64), &response);
    if (status.ok() && response.c().size() == 64 * 64 * 4) {
      ++ok;
    } else {
      ADD_FAILURE() << "victim job " << i << ": " << status.error_code() << " "
                    << status.error_message();
    }
  }
  return ok;
}

bool WaitForUnaryRequests(int metrics_port, double reading, double waiting) {
  std::string text;
  const bool counted = WaitUntil(
      [&] {
        text = ScrapeMetrics(metrics_port);
        return MetricSample(text, "gemm_unary_requests{state=\"reading\"}") ==
                   reading &&
               MetricSample(text, "gemm_unary_requests{state=\"waiting\"}") ==
                   waiting;
      },
      absl::Seconds(10), absl::Milliseconds(20));
  if (!counted) {
    ADD_FAILURE() << "expected " << reading << " reading and " << waiting
                  << " waiting:\n"
                  << text;
  }
  return counted;
}

std::map<uint64_t, std::pair<int, std::string>> ReadEnds(
    grpc::ClientReaderWriter<v1::StreamRequest, v1::StreamResponse>* stream,
    size_t count) {
  std::map<uint64_t, std::pair<int, std::string>> ends;
  v1::StreamResponse response;
  while (ends.size() < count && stream->Read(&response)) {
    if (!response.has_end()) continue;
    ends[response.job_id()] = {response.end().code(), response.end().message()};
  }
  return ends;
}

std::string Http2Frame(uint8_t type, uint8_t flags, uint32_t stream,
                       const std::string& payload) {
  const uint32_t n = payload.size();
  std::string frame = {static_cast<char>(n >> 16),
                       static_cast<char>(n >> 8),
                       static_cast<char>(n),
                       static_cast<char>(type),
                       static_cast<char>(flags),
                       static_cast<char>(stream >> 24),
                       static_cast<char>(stream >> 16),
                       static_cast<char>(stream >> 8),
                       static_cast<char>(stream)};
  return frame + payload;
}

std::string HpackInt(uint64_t value, int prefix_bits) {
  const uint64_t max_prefix = (uint64_t{1} << prefix_bits) - 1;
  if (value < max_prefix) return std::string(1, static_cast<char>(value));
  std::string out(1, static_cast<char>(max_prefix));
  value -= max_prefix;
  for (; value >= 128; value >>= 7) {
    out += static_cast<char>(0x80 | (value & 0x7f));
  }
  return out + static_cast<char>(value);
}

}  // namespace gemm::testing
