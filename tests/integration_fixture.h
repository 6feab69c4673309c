// What the end-to-end suites integration_test*.cc share: a client for a
// server under test, raw requests and calls on the generated stub, status
// checks, and the IntegrationTest fixture (one test build of gemm-server
// for the whole suite, in which kernel "broken" always fails).
//
// Thread-safety: one test thread uses these; the fixture's server is the
// suite's.
//
//   TEST_F(IntegrationTest, X) {
//     auto client = Connect(*server_);
//     ExpectStatus(CallRaw(*server_, RawRequest(4, 5, 6)), grpc::OK, "");
//   }
#ifndef GEMM_TESTS_INTEGRATION_FIXTURE_H_
#define GEMM_TESTS_INTEGRATION_FIXTURE_H_

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "client/lib/gemm_client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/gemm.grpc.pb.h"
#include "tests/metrics_scrape.h"
#include "tests/server_process.h"

namespace gemm::testing {

// Results must match the float64 reference this closely (relative
// Frobenius error).
inline constexpr double kTolerance = 1e-5;

// A client of `server`; jobs over `max_unary_bytes` go on streams.
std::unique_ptr<client::GemmClient> Connect(const ServerProcess& server,
                                            uint64_t max_unary_bytes = 3 << 20);

// A request of m x n x k, A all 0.5 and B all 0.25, alpha 1.
v1::GemmRequest RawRequest(uint32_t m, uint32_t n, uint32_t k);

// `request` as a unary Gemm call on a new channel to `server`.
grpc::Status CallRaw(const ServerProcess& server,
                     const v1::GemmRequest& request,
                     v1::GemmResponse* response = nullptr);

// Expects `s` to have `code` and a message that mentions `fragment`.
void ExpectStatus(const grpc::Status& s, grpc::StatusCode code,
                  const std::string& fragment);

double SecondsSince(std::chrono::steady_clock::time_point start);

// The last line of a server's log.
std::string LastLine(const std::string& log);

// Waits (up to 10 s) until the server of `metrics` holds a job that has left
// its queue for a worker: bytes in flight, no job queued. False when it
// does not.
bool WaitForAJobInTheExecutor(const MetricsEndpoint& metrics);

// One test build of the server for the suite, in which kernel "broken"
// always fails.
class IntegrationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess({"--testing-fail-kernel", "broken"},
                                ServerProcess::kServerWithFaults);
    ASSERT_TRUE(server_->Start().ok());
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Stop(SIGTERM), 0);
    delete server_;
  }
  static inline ServerProcess* server_ = nullptr;
};

}  // namespace gemm::testing

#endif  // GEMM_TESTS_INTEGRATION_FIXTURE_H_
