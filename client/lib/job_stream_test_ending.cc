// JobStream against a scripted server (the suite: job_stream_test.cc,
// fixture job_stream_test_fixture.h): the server ending the stream with jobs
// open, deadlines, Finish waiting for every callback, and retries on the
// same stream.
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "client/lib/job_stream.h"
#include "client/lib/job_stream_test_fixture.h"
#include "gtest/gtest.h"

namespace gemm::client::stream_test {
namespace {

// The server ends the call while jobs are open: each open job's callback
// runs exactly once, with the call's status.
TEST_F(JobStreamTest, ServerEndingTheStreamFailsEachOpenJobOnce) {
  StartServer([](const ReceivedJob& job, int n) {
    if (n == 0) return std::vector<Reply>{End(job, ResultOf(job))};
    if (n == 1) return std::vector<Reply>{};  // left open
    return std::vector<Reply>{
        FinishCall(grpc::Status(grpc::StatusCode::UNAVAILABLE, "going away"))};
  });
  auto stream = Open();
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 4; ++i) {
    jobs.push_back(
        std::make_unique<TestJob>(GemmProblem{.m = 3, .n = 3, .k = 3}, i));
    Submit(stream.get(), jobs.back().get());
  }
  EXPECT_EQ(stream->Finish(), absl::UnavailableError("going away"));
  EXPECT_TRUE(stream->done());
  ASSERT_TRUE(jobs[0]->result.ok()) << jobs[0]->result.status();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(jobs[i]->calls, 1) << i;
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(jobs[i]->result.status(), absl::UnavailableError("going away"));
    EXPECT_TRUE(jobs[i]->Untouched());
  }
}

TEST_F(JobStreamTest, StreamEndingOkWithJobsOpenFailsThemToo) {
  StartServer([](const ReceivedJob& job, int n) {
    if (n == 0) return std::vector<Reply>{};
    return std::vector<Reply>{FinishCall(grpc::Status::OK)};
  });
  auto stream = Open();
  TestJob first({.m = 2, .n = 2, .k = 2}, 1),
      second({.m = 2, .n = 2, .k = 2}, 2);
  Submit(stream.get(), &first);
  Submit(stream.get(), &second);
  EXPECT_TRUE(stream->Finish().ok());
  for (TestJob* job : {&first, &second}) {
    EXPECT_EQ(job->calls, 1);
    EXPECT_EQ(job->result.status().code(), absl::StatusCode::kInternal);
    EXPECT_NE(job->result.status().message().find(
                  "server closed the stream without ending job"),
              std::string::npos)
        << job->result.status();
  }
  // A stream that has ended refuses new jobs at once.
  TestJob late({.m = 2, .n = 2, .k = 2}, 3);
  Submit(stream.get(), &late);
  EXPECT_EQ(late.calls, 1);
  EXPECT_EQ(late.result.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(JobStreamTest, DeadlineEndsJobsTheServerNeverAnswers) {
  StartServer([](const ReceivedJob&, int) { return std::vector<Reply>{}; });
  JobStream::Options options;
  options.timeout = absl::Milliseconds(300);
  auto stream = Open(options);
  TestJob first({.m = 4, .n = 4, .k = 4}, 1),
      second({.m = 4, .n = 4, .k = 4}, 2);
  const auto start = std::chrono::steady_clock::now();
  Submit(stream.get(), &first);
  Submit(stream.get(), &second);
  EXPECT_EQ(stream->Finish().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  for (TestJob* job : {&first, &second}) {
    EXPECT_EQ(job->calls, 1);
    EXPECT_EQ(job->result.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_TRUE(job->Untouched());
  }
}

TEST_F(JobStreamTest, FinishReturnsOnlyOnceEveryCallbackHasReturned) {
  StartServer([](const ReceivedJob& job, int) {
    return std::vector<Reply>{End(job, ResultOf(job))};
  });
  auto stream = Open();
  constexpr int kJobs = 4;
  std::atomic<int> returned{0};
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < kJobs; ++i) {
    jobs.push_back(
        std::make_unique<TestJob>(GemmProblem{.m = 8, .n = 8, .k = 8}, i));
    stream->Submit(
        jobs.back()->args(), jobs.back()->out.data(),
        [&returned](absl::StatusOr<v1::Timing> result) {
          EXPECT_TRUE(result.ok()) << result.status();
          // The test itself: a slow callback, which Finish must wait for.
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          ++returned;
        });
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(returned.load(), kJobs);
  for (const auto& job : jobs) EXPECT_LE(job->Error(), 1e-6);
}

// UNAVAILABLE for a job's first attempt: it goes again on the same stream,
// under a new id, after the backoff.
TEST_F(JobStreamTest, RetriesAnUnavailableJobOnTheSameStream) {
  std::vector<uint64_t> ids;  // the script runs on one read reaction at a time
  StartServer([&ids](const ReceivedJob& job, int n) {
    ids.push_back(job.id);
    if (n == 0) {
      return std::vector<Reply>{
          Fail(job, absl::StatusCode::kUnavailable, "queue full")};
    }
    return InThreeChunks(job);
  });
  RetryPolicy policy;
  policy.max_attempts = 2;
  policy.initial_backoff = absl::Milliseconds(5);
  RetryScheduler retries(policy);
  JobStream::Options options;
  options.max_attempts = policy.max_attempts;
  auto stream = Open(options, &retries);
  TestJob job({.m = 5, .n = 5, .k = 5}, 1);
  Submit(stream.get(), &job);
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(job.calls, 1);
  ASSERT_TRUE(job.result.ok()) << job.result.status();
  EXPECT_LE(job.Error(), 1e-6);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_NE(ids[0], ids[1]);
}

}  // namespace
}  // namespace gemm::client::stream_test
