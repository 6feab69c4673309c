#include "tests/integration_fixture.h"

#include <vector>

#include "absl/time/time.h"
#include "common/wait_until.h"

namespace gemm::testing {

std::unique_ptr<client::GemmClient> Connect(const ServerProcess& server,
                                            uint64_t max_unary_bytes) {
  client::GemmClient::Options options;
  options.target = server.address();
  options.max_unary_bytes = max_unary_bytes;
  auto client = client::GemmClient::Create(options);
  EXPECT_TRUE(client.ok());
  return std::move(*client);
}

v1::GemmRequest RawRequest(uint32_t m, uint32_t n, uint32_t k) {
  v1::GemmRequest request;
  request.mutable_params()->set_m(m);
  request.mutable_params()->set_n(n);
  request.mutable_params()->set_k(k);
  request.mutable_params()->set_alpha(1);
  std::vector<float> a(uint64_t{m} * k, 0.5f), b(uint64_t{k} * n, 0.25f);
  request.set_a(a.data(), 4 * a.size());
  request.set_b(b.data(), 4 * b.size());
  return request;
}

grpc::Status CallRaw(const ServerProcess& server,
                     const v1::GemmRequest& request,
                     v1::GemmResponse* response) {
  auto stub = v1::GemmService::NewStub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::GemmResponse ignored;
  return stub->Gemm(&context, request, response ? response : &ignored);
}

void ExpectStatus(const grpc::Status& s, grpc::StatusCode code,
                  const std::string& fragment) {
  EXPECT_EQ(s.error_code(), code) << s.error_message();
  EXPECT_NE(s.error_message().find(fragment), std::string::npos)
      << "'" << s.error_message() << "' should mention '" << fragment << "'";
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

std::string LastLine(const std::string& log) {
  std::string trimmed = log;
  while (!trimmed.empty() && trimmed.back() == '\n') trimmed.pop_back();
  const size_t newline = trimmed.rfind('\n');
  return newline == std::string::npos ? trimmed : trimmed.substr(newline + 1);
}

bool WaitForAJobInTheExecutor(const MetricsEndpoint& metrics) {
  return WaitUntil(
      [&] {
        // One scrape, so that both samples are of the same moment.
        const std::string text = metrics.Scrape();
        return MetricSample(text, "gemm_inflight_bytes ") > 0 &&
               MetricSample(text, "gemm_queued_jobs ") == 0;
      },
      absl::Seconds(10), absl::Milliseconds(10));
}

}  // namespace gemm::testing
