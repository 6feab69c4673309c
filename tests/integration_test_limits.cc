// End-to-end tests (the suite: integration_test.cc): limits. Coalesced small
// writes, jobs over the size limits, a full queue on unary calls and on a
// stream, and small jobs beside a stuck long one.
#include <signal.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/lib/gemm_client.h"
#include "common/reference_gemm.h"
#include "common/wait_until.h"
#include "gtest/gtest.h"
#include "tests/integration_fixture.h"
#include "tests/metrics_scrape.h"
#include "tests/server_process.h"
#include "tests/test_job.h"

namespace gemm {
namespace {

using client::GemmArgs;
using client::GemmClient;
using testing::CallRaw;
using testing::Connect;
using testing::ExpectStatus;
using testing::kTolerance;
using testing::MetricSample;
using testing::MetricsEndpoint;
using testing::RawRequest;
using testing::ServerProcess;
using testing::TestJob;
using testing::WaitUntil;

TEST(CoalesceTest, BufferHintedMessagesAllArriveAndAreRight) {
  // Both sides hold small messages back while more are queued: a burst of
  // small jobs on one stream (whole-job messages, inline results) and a
  // chunked one among them must all come back, and right.
  ServerProcess server({"--coalesce-small-writes", "true"});
  ASSERT_TRUE(server.Start().ok());
  GemmClient::Options options;
  options.target = server.address();
  options.coalesce_small_writes = true;
  options.chunk_bytes = 64 << 10;
  auto client = GemmClient::Create(options);
  ASSERT_TRUE(client.ok());
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 40; ++i) {
    jobs.push_back(std::make_unique<TestJob>(17 + i, 23, 9 + i % 5, false,
                                             false, 1.0f, 0.0f, 30 + i));
  }
  jobs.push_back(
      std::make_unique<TestJob>(700, 600, 500, false, false, 1.0f, 0.5f, 99));
  std::vector<absl::Status> statuses(jobs.size());
  auto stream = (*client)->OpenStream();
  for (size_t i = 0; i < jobs.size(); ++i) {
    stream->Submit(
        jobs[i]->args, jobs[i]->out.data(),
        [&, i](absl::StatusOr<v1::Timing> t) { statuses[i] = t.status(); });
  }
  ASSERT_TRUE(stream->Finish().ok());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i];
    EXPECT_LE(jobs[i]->Error(), kTolerance) << i;
  }
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(LimitsTest, OversizedJobsAreResourceExhausted) {
  ServerProcess server({"--max-job-bytes", "100000", "--max-dim", "5000"});
  ASSERT_TRUE(server.Start().ok());
  ExpectStatus(CallRaw(server, RawRequest(100, 100, 100)),
               grpc::RESOURCE_EXHAUSTED, "max_job_bytes");
  ExpectStatus(CallRaw(server, RawRequest(1, 1, 6000)),
               grpc::RESOURCE_EXHAUSTED, "max_dim");
  EXPECT_TRUE(CallRaw(server, RawRequest(50, 50, 50)).ok());
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(LimitsTest, AJobRefusedMidUploadFailsAloneAndItsOperandsMayGo) {
  // The server refuses these jobs as soon as it reads their params, while
  // the client may still be sending their chunks; the rest is never sent,
  // and each callback poisons and frees the operands. Outgoing messages
  // hold copies, so that is safe whenever it happens (an ASan build,
  // --config=asan, would see a use after free otherwise).
  ServerProcess server({"--max-job-bytes", "1000000"});
  ASSERT_TRUE(server.Start().ok());
  GemmClient::Options options;
  options.target = server.address();
  // Large chunks: the refusal comes back while the next one is on its
  // way.
  options.chunk_bytes = 4 << 20;
  auto client = GemmClient::Create(options);
  ASSERT_TRUE(client.ok());
  auto stream = (*client)->OpenStream();
  constexpr uint32_t kDim = 1200;  // 17 MB per job
  constexpr int kJobs = 8;
  std::vector<float> out(uint64_t{kDim} * kDim);
  absl::Mutex mu;
  std::vector<absl::Status> statuses;
  for (int i = 0; i < kJobs; ++i) {
    auto* a = new std::vector<float>(uint64_t{kDim} * kDim);
    auto* b = new std::vector<float>(uint64_t{kDim} * kDim);
    FillRandom(a->data(), a->size(), 10 + i);
    FillRandom(b->data(), b->size(), 20 + i);
    GemmArgs args{
        .problem = {kDim, kDim, kDim}, .a = a->data(), .b = b->data()};
    stream->Submit(args, out.data(), [&, a, b](absl::StatusOr<v1::Timing> t) {
      std::fill(a->begin(), a->end(), -1.0f);
      std::fill(b->begin(), b->end(), -1.0f);
      delete a;
      delete b;
      absl::MutexLock lock(&mu);
      statuses.push_back(t.status());
    });
  }
  // The stream goes on: a small job after them is answered correctly.
  TestJob small(30, 20, 10, false, false, 1.0f, 0.0f, 5);
  absl::Notification small_done;
  absl::Status small_status;
  stream->Submit(small.args, small.out.data(),
                 [&](absl::StatusOr<v1::Timing> t) {
                   small_status = t.status();
                   small_done.Notify();
                 });
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_TRUE(small_done.HasBeenNotified());
  EXPECT_TRUE(small_status.ok()) << small_status;
  EXPECT_LE(small.Error(), kTolerance);
  ASSERT_EQ(statuses.size(), static_cast<size_t>(kJobs));
  for (const absl::Status& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_NE(s.message().find("max_job_bytes"), std::string::npos) << s;
  }
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// A server with room for one queued job, whose kernel "stuck" holds the
// single worker for 3 s (then fails with INTERNAL).
// One worker, no light one: the stuck job holds every job behind it.
// `extra` flags go after these.
ServerProcess ServerWithAStuckWorker(std::vector<std::string> extra = {}) {
  std::vector<std::string> flags = {"--max-queued-jobs",
                                    "1",
                                    "--threads",
                                    "1",
                                    "--workers",
                                    "1",
                                    "--testing-stuck-kernel",
                                    "stuck",
                                    "--testing-stuck-s",
                                    "3"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return ServerProcess(flags, ServerProcess::kServerWithFaults);
}

// A job for the stuck kernel, then six small ones.
std::vector<std::unique_ptr<TestJob>> StuckJobThenSmallOnes() {
  std::vector<std::unique_ptr<TestJob>> jobs;
  jobs.push_back(std::make_unique<TestJob>(8, 8, 8, false, false, 1, 0, 1));
  jobs.back()->args.kernel = "stuck";
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(
        std::make_unique<TestJob>(8, 8, 8, false, false, 1, 0, 2 + i));
  }
  return jobs;
}

// The CPU backend ran one job at a time: one client's long GEMM kept every
// other client's small jobs waiting for all of it. A light worker now takes
// the small ones (here while a heavy job is stuck for 3 s).
TEST(LimitsTest, SmallJobsDoNotWaitBehindALongOne) {
  const MetricsEndpoint metrics("small-jobs");
  std::vector<std::string> flags = {
      "--threads",         "1", "--testing-stuck-kernel", "stuck",
      "--testing-stuck-s", "3"};
  for (const std::string& flag : metrics.Flags()) flags.push_back(flag);
  ServerProcess server(flags, ServerProcess::kServerWithFaults);
  ASSERT_TRUE(server.Start().ok());
  auto heavy_client = Connect(server);
  TestJob heavy(640, 640, 640, false, false, 1, 0, 1);
  heavy.args.kernel = "stuck";
  absl::Notification heavy_done;
  absl::Status heavy_status;
  heavy_client->GemmAsync(heavy.args, heavy.out.data(),
                          [&](absl::StatusOr<v1::Timing> t) {
                            heavy_status = t.status();
                            heavy_done.Notify();
                          });
  // The small jobs come once the heavy one holds its worker.
  ASSERT_TRUE(testing::WaitForAJobInTheExecutor(metrics)) << server.Log();
  auto client = Connect(server);
  for (int i = 0; i < 5; ++i) {
    TestJob small(37, 29, 41, i % 2 == 1, i % 3 == 1, 1.5f, 0.5f, 10 + i);
    const absl::StatusOr<v1::Timing> timing =
        client->Gemm(small.args, small.out.data());
    ASSERT_TRUE(timing.ok()) << timing.status();
    EXPECT_LE(small.Error(), kTolerance);
  }
  EXPECT_FALSE(heavy_done.HasBeenNotified())
      << "the small jobs waited for the stuck one";
  heavy_done.WaitForNotification();
  EXPECT_EQ(heavy_status.code(), absl::StatusCode::kInternal) << heavy_status;
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(LimitsTest, AFullQueueTurnsUnaryCallsAwayWithUnavailable) {
  const MetricsEndpoint metrics("full-queue");
  ServerProcess server = ServerWithAStuckWorker(metrics.Flags());
  ASSERT_TRUE(server.Start().ok());
  auto client = Connect(server);
  std::vector<std::unique_ptr<TestJob>> jobs = StuckJobThenSmallOnes();
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
    // The worker takes the stuck job before the small ones come.
    if (i == 0) {
      ASSERT_TRUE(testing::WaitForAJobInTheExecutor(metrics)) << server.Log();
    }
  }
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* d) { return *d == 7; }, &done));
  }
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kInternal) << statuses[0];
  int ok = 0, unavailable = 0;
  for (size_t i = 1; i < jobs.size(); ++i) {
    if (statuses[i].ok()) {
      ++ok;
      EXPECT_LE(jobs[i]->Error(), kTolerance);
    } else {
      EXPECT_EQ(statuses[i].code(), absl::StatusCode::kUnavailable)
          << statuses[i];
      EXPECT_NE(statuses[i].message().find("queue full"), std::string::npos);
      ++unavailable;
    }
  }
  EXPECT_EQ(ok, 1) << "one small job fits the queue";
  EXPECT_EQ(unavailable, 5);
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// Issue 11, defect 6: on a stream the same jobs came back UNAVAILABLE; the
// server now stops reading the stream until the queue has room.
TEST(LimitsTest, AFullQueueSlowsAStreamDownAndEveryJobRuns) {
  ServerProcess server = ServerWithAStuckWorker();
  ASSERT_TRUE(server.Start().ok());
  auto client = Connect(server);
  std::vector<std::unique_ptr<TestJob>> jobs = StuckJobThenSmallOnes();
  std::vector<absl::Status> statuses(jobs.size());
  auto stream = client->OpenStream();
  for (size_t i = 0; i < jobs.size(); ++i) {
    stream->Submit(
        jobs[i]->args, jobs[i]->out.data(),
        [&, i](absl::StatusOr<v1::Timing> t) { statuses[i] = t.status(); });
  }
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kInternal) << statuses[0];
  for (size_t i = 1; i < jobs.size(); ++i) {
    EXPECT_TRUE(statuses[i].ok()) << "job " << i << ": " << statuses[i];
    EXPECT_LE(jobs[i]->Error(), kTolerance) << "job " << i;
  }
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace gemm
