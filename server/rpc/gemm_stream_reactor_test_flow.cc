// GemmStream in this process (the fixture: gemm_stream_reactor_test_fixture.h):
// a cancelled stream, flow control against a full budget and queue, the
// drain at shutdown, and jobs declared and never sent.
#include <map>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/wire_codec.h"
#include "server/rpc/gemm_stream_reactor.h"
#include "server/rpc/gemm_stream_reactor_test_fixture.h"

namespace gemm::server::stream_test {
namespace {

TEST_F(GemmStreamReactorTest, CancelledStreamDropsItsQueuedJobs) {
  // Gate closed: the first job runs and waits there, the second queues.
  const Job first(Problem(16, 16, 16), 71);
  const Job second(Problem(24, 16, 16), 81);
  RawStream stream(stub_.get());
  ASSERT_TRUE(
      stream.Write(wire::EncodeWholeJob(1, first.Params(), first.Operands())));
  ASSERT_TRUE(stream.Write(
      wire::EncodeWholeJob(2, second.Params(), second.Operands())));
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while ((executor_->batches() < 1 || scheduler_->queued() < 1) &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(executor_->batches(), 1);
  ASSERT_EQ(scheduler_->queued(), 1u);
  stream.Cancel();
  std::map<uint64_t, Received> got;
  EXPECT_EQ(stream.Finish(&got, {}).error_code(), grpc::StatusCode::CANCELLED);
  // The server has seen the cancellation once the reactor cancelled its
  // jobs (the running one included).
  while (!executor_->HeldJobCancelled() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(executor_->HeldJobCancelled());
  executor_->Open();
  v1::ServerStats stats = Stats();
  while (stats.jobs_ok() + stats.jobs_failed() < 2 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
    stats = Stats();
  }
  // The running job finished, the queued one was dropped unrun; neither
  // result reached the client, so both count as failed.
  EXPECT_EQ(stats.jobs_ok(), 0u);
  EXPECT_EQ(stats.jobs_failed(), 2u);
  EXPECT_EQ(executor_->batches(), 1);
}

// A job's claim on the in-flight budget: A, B and C, and the bookkeeping.
constexpr uint64_t kFlowJobBytes = 3 * 16 * 16 * 4 + kJobBookkeepingBytes;

// Room for three 16^3 jobs in flight, and two in the queue.
class FlowControlTest : public GemmStreamReactorTest {
 protected:
  ServiceLimits Limits() const override {
    ServiceLimits limits;
    limits.max_inflight_bytes = 3 * kFlowJobBytes;
    limits.max_job_bytes = 3 * kFlowJobBytes;
    return limits;
  }
  BatchScheduler::Options Batching() const override {
    BatchScheduler::Options batching;
    batching.max_queued_jobs = 2;
    batching.max_batch_size = 1;
    return batching;
  }
  void WaitForBatches(int n) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (executor_->batches() < n && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_GE(executor_->batches(), n);
  }
};

// Issue 11, defect 6: pipelined jobs beyond the budget or the queue came
// back UNAVAILABLE; the stream now waits, and every job runs.
TEST_F(FlowControlTest, AFullBudgetAndQueueSlowTheStreamDown) {
  std::vector<std::unique_ptr<Job>> jobs;
  std::map<uint64_t, uint64_t> c_elements;
  RawStream stream(stub_.get());
  for (uint64_t id = 1; id <= 12; ++id) {
    jobs.push_back(std::make_unique<Job>(Problem(16, 16, 16), 200 + id));
    c_elements[id] = jobs.back()->problem.c_elements();
    ASSERT_TRUE(stream.Write(wire::EncodeWholeJob(id, jobs.back()->Params(),
                                                  jobs.back()->Operands())));
  }
  WaitForBatches(1);
  // One job held in the executor, two queued: the budget (3 jobs) is full
  // and the stream reads no more. Let it all through.
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(executor_->batches(), 1);
  executor_->Open();
  std::map<uint64_t, Received> got;
  const grpc::Status status = stream.Finish(&got, c_elements);
  EXPECT_TRUE(status.ok()) << status.error_message();
  for (uint64_t id = 1; id <= 12; ++id) {
    SCOPED_TRACE(id);
    ExpectCorrect(got[id], *jobs[id - 1]);
  }
  EXPECT_EQ(service_->rejected_jobs(), 0u);
}

// With a job of its own half received, a stream cannot wait for budget
// (that job needs its later messages): the new job fails with UNAVAILABLE.
TEST_F(FlowControlTest, AStreamWithAHalfReceivedJobDoesNotWaitOnItself) {
  const Job half(Problem(16, 16, 16), 301);
  const Job running(Problem(16, 16, 16), 311);
  const Job third(Problem(16, 16, 16), 321);
  const Job fourth(Problem(16, 16, 16), 331);
  RawStream stream(stub_.get());
  v1::StreamRequest first;
  first.set_job_id(1);
  *first.mutable_params() = half.Params();
  ASSERT_TRUE(stream.WritePart(first));  // holds a third of the budget
  ASSERT_TRUE(stream.Write(
      wire::EncodeWholeJob(2, running.Params(), running.Operands())));
  WaitForBatches(1);  // job 2 holds the second third, in the executor
  ASSERT_TRUE(
      stream.Write(wire::EncodeWholeJob(3, third.Params(), third.Operands())));
  // The budget is full now, and job 1 is half received.
  ASSERT_TRUE(stream.Write(
      wire::EncodeWholeJob(4, fourth.Params(), fourth.Operands())));
  v1::StreamRequest a;
  a.set_job_id(1);
  a.set_operand(v1::OPERAND_A);
  ASSERT_TRUE(stream.WritePart(a, half.Bytes(half.a)));
  v1::StreamRequest b;
  b.set_job_id(1);
  b.set_operand(v1::OPERAND_B);
  b.set_end_of_job(true);
  ASSERT_TRUE(stream.WritePart(b, half.Bytes(half.b)));
  // Job 4's answer is decided while job 2 still holds its budget.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (service_->rejected_jobs() < 1 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(service_->rejected_jobs(), 1u);
  executor_->Open();
  std::map<uint64_t, Received> got;
  const grpc::Status status =
      stream.Finish(&got, {{1, half.problem.c_elements()},
                           {2, running.problem.c_elements()},
                           {3, third.problem.c_elements()}});
  EXPECT_TRUE(status.ok()) << status.error_message();
  ExpectCorrect(got[1], half);
  ExpectCorrect(got[2], running);
  ExpectCorrect(got[3], third);
  EXPECT_EQ(got[4].ends, 1);
  EXPECT_EQ(got[4].end.code(), grpc::UNAVAILABLE) << got[4].end.message();
}

// Issue 11, defect 7: shutdown ends streams once their accepted jobs have
// answered, jobs not accepted get UNAVAILABLE, and an idle stream ends at
// once instead of holding shutdown for the whole grace period.
TEST_F(GemmStreamReactorTest, DrainEndsStreamsOnceTheirAcceptedJobsAnswer) {
  const Job accepted(Problem(12, 10, 8), 401);
  const Job partial(Problem(12, 10, 8), 411);
  RawStream busy(stub_.get());
  RawStream idle(stub_.get());
  ASSERT_TRUE(busy.Write(
      wire::EncodeWholeJob(1, accepted.Params(), accepted.Operands())));
  v1::StreamRequest first;
  first.set_job_id(2);
  *first.mutable_params() = partial.Params();
  ASSERT_TRUE(busy.WritePart(first));
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (executor_->batches() < 1 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(executor_->batches(), 1);
  // Job 2's params must have been read before the drain.
  absl::SleepFor(absl::Milliseconds(50));
  scheduler_->StopAccepting();
  service_->Drain();

  std::map<uint64_t, Received> idle_got;
  const absl::Time idle_start = absl::Now();
  const grpc::Status idle_status = idle.Finish(&idle_got, {});
  EXPECT_EQ(idle_status.error_code(), grpc::UNAVAILABLE)
      << idle_status.error_message();
  EXPECT_LT(absl::Now() - idle_start, absl::Seconds(5));
  EXPECT_TRUE(idle_got.empty());

  executor_->Open();
  std::map<uint64_t, Received> got;
  const grpc::Status status =
      busy.Finish(&got, {{1, accepted.problem.c_elements()}});
  EXPECT_EQ(status.error_code(), grpc::UNAVAILABLE) << status.error_message();
  ExpectCorrect(got[1], accepted);
  EXPECT_EQ(got[2].ends, 1);
  EXPECT_EQ(got[2].end.code(), grpc::UNAVAILABLE) << got[2].end.message();
  EXPECT_NE(got[2].end.message().find("shutting down"), std::string::npos);
}

// Room for three 16^3 jobs in flight, and jobs being received expire after
// 300 ms without data.
class StallTest : public FlowControlTest {
 protected:
  ServiceLimits Limits() const override {
    ServiceLimits limits = FlowControlTest::Limits();
    limits.job_stall_timeout = absl::Milliseconds(300);
    return limits;
  }
};

// Issue 12, item 1: a few params-only messages reserved the whole budget
// for bytes that never came, for as long as their stream stayed open, and
// every other client waited (or, on unary calls, got UNAVAILABLE).
TEST_F(StallTest, JobsDeclaredAndNeverSentGiveTheirBudgetBack) {
  executor_->Open();
  const Job job(Problem(16, 16, 16), 501);
  RawStream hog(stub_.get());
  for (uint64_t id = 1; id <= 3; ++id) {
    v1::StreamRequest first;
    first.set_job_id(id);
    *first.mutable_params() = job.Params();
    ASSERT_TRUE(hog.WritePart(first));  // the budget is full after three
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (service_->inflight_bytes() < 3 * kFlowJobBytes &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(service_->inflight_bytes(), 3 * kFlowJobBytes);
  // Without expiry this stream would wait for room to the deadline.
  RawStream victim(stub_.get(), absl::Seconds(20));
  ASSERT_TRUE(
      victim.Write(wire::EncodeWholeJob(1, job.Params(), job.Operands())));
  std::map<uint64_t, Received> got;
  const grpc::Status status =
      victim.Finish(&got, {{1, job.problem.c_elements()}});
  EXPECT_TRUE(status.ok()) << status.error_message();
  ExpectCorrect(got[1], job);
  // The hog's jobs ended with DEADLINE_EXCEEDED; a late part is ignored.
  v1::StreamRequest late;
  late.set_job_id(1);
  late.set_operand(v1::OPERAND_A);
  ASSERT_TRUE(hog.WritePart(late, job.Bytes(job.a)));
  std::map<uint64_t, Received> hog_got;
  const grpc::Status hog_status = hog.Finish(&hog_got, {});
  EXPECT_TRUE(hog_status.ok()) << hog_status.error_message();
  for (uint64_t id = 1; id <= 3; ++id) {
    SCOPED_TRACE(id);
    EXPECT_EQ(hog_got[id].ends, 1);
    EXPECT_EQ(hog_got[id].end.code(), grpc::DEADLINE_EXCEEDED);
    EXPECT_NE(hog_got[id].end.message().find("no data for"), std::string::npos)
        << hog_got[id].end.message();
  }
}

}  // namespace
}  // namespace gemm::server::stream_test
