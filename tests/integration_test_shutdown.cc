// End-to-end tests (the suite: integration_test.cc): shutdown. SIGTERM with
// jobs in flight, health during the drain delay, an idle stream, a job
// stuck in the executor, a huge streamed job.
#include <signal.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/lib/gemm_client.h"
#include "common/wait_until.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/gemm.grpc.pb.h"
#include "server/testing/blocking_generic_call.h"
#include "tests/health_check.h"
#include "tests/integration_fixture.h"
#include "tests/metrics_scrape.h"
#include "tests/server_process.h"
#include "tests/test_job.h"

namespace gemm {
namespace {

using testing::Connect;
using testing::HealthCheck;
using testing::HealthRequest;
using testing::HealthStatus;
using testing::kTolerance;
using testing::LastLine;
using testing::MetricSample;
using testing::MetricsEndpoint;
using testing::RawRequest;
using testing::SecondsSince;
using testing::ServerProcess;
using testing::TestJob;
using testing::WaitUntil;

TEST(ShutdownTest, SigtermFinishesJobsInFlightThenExitsZero) {
  // A long batching delay holds accepted jobs in the queue, so they are
  // surely in flight when the signal comes; shutdown must still run them.
  const MetricsEndpoint metrics("sigterm-in-flight");
  std::vector<std::string> flags = {"--max-queue-delay-us", "20000000",
                                    "--max-batch-size", "64"};
  for (const std::string& flag : metrics.Flags()) flags.push_back(flag);
  ServerProcess server(flags);
  ASSERT_TRUE(server.Start().ok());
  auto client = Connect(server, uint64_t{1} << 40);  // all unary
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(
        std::make_unique<TestJob>(120, 130, 140, false, false, 1, 0, 10 + i));
  }
  absl::Mutex mu;
  std::vector<absl::Status> statuses(jobs.size());
  int done = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    client->GemmAsync(jobs[i]->args, jobs[i]->out.data(),
                      [&, i](absl::StatusOr<v1::Timing> t) {
                        absl::MutexLock lock(&mu);
                        statuses[i] = t.status();
                        ++done;
                      });
  }
  // Every job has arrived and waits in the queue; none can finish before
  // the 20 s delay.
  ASSERT_TRUE(WaitUntil(
      [&] { return metrics.Sample("gemm_queued_jobs ") == jobs.size(); },
      absl::Seconds(10)))
      << metrics.Scrape();
  {
    absl::MutexLock lock(&mu);
    ASSERT_EQ(done, 0) << "jobs finished before the signal";
  }
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(15), 0) << "exits 0 long before the 20 s delay";
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* d) { return *d == 6; }, &done));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(statuses[i].ok()) << "job " << i << ": " << statuses[i];
    EXPECT_LE(jobs[i]->Error(), kTolerance) << "job " << i;
  }
  // Nothing listens any more.
  TestJob late(2, 2, 2);
  EXPECT_EQ(client->Gemm(late.args, late.out.data()).status().code(),
            absl::StatusCode::kUnavailable);
}

// Issue 11, defect 7: after SIGTERM the port refused connections at once,
// so no health check ever saw NOT_SERVING.
TEST(ShutdownTest, HealthIsNotServingDuringTheDrainDelayWhileJobsStillRun) {
  ServerProcess server({"--drain-delay-s", "2", "--shutdown-grace-s", "10",
                        "--log-level", "info"});
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(HealthCheck(server.address()), 1) << "SERVING";
  auto client = Connect(server);
  server.Signal(SIGTERM);
  // The drain begins as the signal is handled; the drain delay (2 s) is
  // the window in which health must say so.
  EXPECT_TRUE(WaitUntil([&] { return HealthCheck(server.address()) == 2; },
                        absl::Seconds(2)))
      << "NOT_SERVING";
  TestJob job(33, 44, 55);
  absl::StatusOr<v1::Timing> t = client->Gemm(job.args, job.out.data());
  EXPECT_TRUE(t.ok()) << t.status();
  EXPECT_LE(job.Error(), kTolerance);
  EXPECT_EQ(server.Wait(15), 0);
  EXPECT_NE(LastLine(server.Log()).find("shut down cleanly"), std::string::npos)
      << server.Log();
}

// grpc.health.v1 is the server's own (server/observability/health_service.h):
// Check knows the whole server ("") and gemm.v1.GemmService, and answers
// NOT_FOUND for another service; Watch sends SERVING, then NOT_SERVING as
// the drain begins, and ends when the server shuts down, which it does not
// hold.
TEST(ShutdownTest, HealthWatchSeesTheDrainAndEndsAtShutdown) {
  ServerProcess server({"--drain-delay-s", "1", "--shutdown-grace-s", "30",
                        "--log-level", "info"});
  ASSERT_TRUE(server.Start().ok());
  grpc::GenericStub stub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  for (const auto& [service, expected] :
       std::vector<std::pair<std::string, int>>{
           {"", 1}, {"gemm.v1.GemmService", 1}, {"no.Such", -5}}) {
    server::BlockingGenericCall check(&stub, "/grpc.health.v1.Health/Check",
                                      absl::Seconds(5));
    ASSERT_TRUE(check.Write(HealthRequest(service)));
    check.WritesDone();
    grpc::ByteBuffer response;
    const bool got = check.Read(&response);
    const grpc::Status status = check.Finish();
    EXPECT_EQ(got ? HealthStatus(response) : -status.error_code(), expected)
        << service << ": " << status.error_message();
  }
  server::BlockingGenericCall watch(&stub, "/grpc.health.v1.Health/Watch");
  ASSERT_TRUE(watch.Write(HealthRequest("")));
  watch.WritesDone();
  grpc::ByteBuffer response;
  ASSERT_TRUE(watch.Read(&response));
  EXPECT_EQ(HealthStatus(response), 1) << "SERVING";
  const auto start = std::chrono::steady_clock::now();
  server.Signal(SIGTERM);
  ASSERT_TRUE(watch.Read(&response));
  EXPECT_EQ(HealthStatus(response), 2) << "NOT_SERVING";
  EXPECT_FALSE(watch.Read(&response));
  EXPECT_EQ(watch.Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(server.Wait(15), 0);
  EXPECT_LT(SecondsSince(start), 10) << "the watch held the shutdown";
  EXPECT_NE(LastLine(server.Log()).find("shut down cleanly"), std::string::npos)
      << server.Log();
}

// Issue 11, defect 7: an open, idle GemmStream held shutdown for the whole
// grace period.
TEST(ShutdownTest, AnIdleStreamEndsAtOnce) {
  ServerProcess server({"--shutdown-grace-s", "30", "--log-level", "info"});
  ASSERT_TRUE(server.Start().ok());
  auto client = Connect(server);
  std::unique_ptr<client::JobStream> stream = client->OpenStream();
  TestJob job(20, 30, 40);
  absl::Notification done;
  stream->Submit(job.args, job.out.data(), [&](absl::StatusOr<v1::Timing> t) {
    EXPECT_TRUE(t.ok()) << t.status();
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_LE(job.Error(), kTolerance);
  // The stream stays open, idle.
  const auto start = std::chrono::steady_clock::now();
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(20), 0);
  EXPECT_LT(SecondsSince(start), 5.0) << "an idle stream held shutdown";
  EXPECT_NE(LastLine(server.Log()).find("shut down cleanly"), std::string::npos)
      << server.Log();
  EXPECT_EQ(stream->Finish().code(), absl::StatusCode::kUnavailable);
}

// Issue 11, defect 2: shutdown must end within the grace period plus a
// small bound whatever the calls are doing, here a job that never leaves
// the executor.
TEST(ShutdownTest, AJobStuckInTheExecutorCannotHoldShutdown) {
  const MetricsEndpoint metrics("stuck-at-shutdown");
  std::vector<std::string> flags = {"--testing-stuck-kernel",
                                    "stuck",
                                    "--shutdown-grace-s",
                                    "1",
                                    "--log-level",
                                    "info"};
  for (const std::string& flag : metrics.Flags()) flags.push_back(flag);
  ServerProcess server(flags, ServerProcess::kServerWithFaults);
  ASSERT_TRUE(server.Start().ok());
  auto client = Connect(server);
  TestJob job(8, 8, 8);
  job.args.kernel = "stuck";
  absl::Notification answered;
  client->GemmAsync(job.args, job.out.data(),
                    [&](absl::StatusOr<v1::Timing> t) {
                      EXPECT_FALSE(t.ok());
                      answered.Notify();
                    });
  ASSERT_TRUE(testing::WaitForAJobInTheExecutor(metrics)) << server.Log();
  const auto start = std::chrono::steady_clock::now();
  server.Signal(SIGTERM);
  const int code = server.Wait(30);
  // Grace 1 s plus the 5 s bound, with room for a loaded machine.
  EXPECT_NE(code, -1) << "still running 30 s after SIGTERM";
  EXPECT_LT(SecondsSince(start), 9.0);
  EXPECT_EQ(code, 1) << "a forced exit is not a clean one";
  EXPECT_NE(LastLine(server.Log()).find("exiting without it"),
            std::string::npos)
      << server.Log();
  EXPECT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

// Issue 11, defect 2: with --max-dim 4294967295, a streamed job of
// 2^30 x 2^31 x 2^31 wedged its stream (no JobEnd for it or the next job).
TEST(ShutdownTest, AHugeStreamedJobGetsItsAnswerAndTheNextJobRuns) {
  ServerProcess server({"--max-dim", "4294967295", "--shutdown-grace-s", "5",
                        "--log-level", "debug"});
  // The call's context is gone before the signal: a client that keeps a
  // finished call's ClientContext keeps its HTTP/2 stream, and with it the
  // server's shutdown, waiting to the end of the grace period.
  ASSERT_TRUE(server.Start().ok());
  {
    auto stub = v1::GemmService::NewStub(grpc::CreateChannel(
        server.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(20));
    auto stream = stub->GemmStream(&context);
    v1::StreamRequest req;
    req.set_job_id(1);
    req.mutable_params()->set_m(1u << 30);
    req.mutable_params()->set_n(2147483648u);
    req.mutable_params()->set_k(2147483648u);
    req.mutable_params()->set_alpha(1);
    req.set_end_of_job(true);
    ASSERT_TRUE(stream->Write(req));
    std::vector<float> a(6, 1.0f), b(6, 2.0f);
    req.Clear();
    req.set_job_id(2);
    *req.mutable_job() = RawRequest(2, 2, 3);
    req.mutable_job()->set_a(a.data(), 24);
    req.mutable_job()->set_b(b.data(), 24);
    req.mutable_job()->mutable_params()->set_inline_result_max_bytes(16);
    ASSERT_TRUE(stream->Write(req));
    stream->WritesDone();
    std::map<uint64_t, v1::JobEnd> ends;
    v1::StreamResponse resp;
    while (stream->Read(&resp)) {
      if (resp.has_end()) ends[resp.job_id()] = resp.end();
    }
    EXPECT_TRUE(stream->Finish().ok());
    ASSERT_EQ(ends.size(), 2u);
    EXPECT_EQ(ends[1].code(), grpc::RESOURCE_EXHAUSTED) << ends[1].message();
    EXPECT_EQ(ends[2].code(), 0) << ends[2].message();
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(server.Stop(SIGTERM), 0);
  EXPECT_LT(SecondsSince(start), 5.0);
}

}  // namespace
}  // namespace gemm
