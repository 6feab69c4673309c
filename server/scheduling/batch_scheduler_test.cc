// BatchScheduler: clients taking turns, batches forming (size, delay), the
// queue's limit and one client's share of it. batch_scheduler_test_jobs.cc
// has jobs dropped unrun, Stop() and light workers; the fixture is in
// batch_scheduler_test_fixture.h.
#include "server/scheduling/batch_scheduler.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/scheduling/batch_scheduler_test_fixture.h"

namespace gemm::server::scheduler_test {
namespace {

// The queue was one FIFO: a client with many jobs queued held every other
// client's jobs back behind all of them. Clients now take turns.
TEST(BatchSchedulerTest, ClientsTakeTurns) {
  RecordingExecutor executor;
  auto scheduler = BatchScheduler::Create({.max_batch_size = 16}, &executor);
  ASSERT_TRUE(scheduler.ok());
  Outcome outcome;
  ASSERT_TRUE((*scheduler)->Submit(ClientJob("a", 8, &outcome)).ok());
  executor.WaitUntilBusy();
  // Shapes that cannot share a launch, so that each job is a batch.
  for (uint32_t m = 16; m < 22; ++m) {
    ASSERT_TRUE((*scheduler)->Submit(ClientJob("a", m, &outcome)).ok());
  }
  ASSERT_TRUE((*scheduler)->Submit(ClientJob("b", 100, &outcome)).ok());
  ASSERT_TRUE((*scheduler)->Submit(ClientJob("b", 101, &outcome)).ok());
  ASSERT_TRUE((*scheduler)->Submit(ClientJob("c", 200, &outcome)).ok());
  executor.Release();
  (*scheduler)->Stop();
  EXPECT_EQ(executor.ms(),
            (std::vector<uint32_t>{8, 100, 200, 16, 101, 17, 18, 19, 20, 21}));
  EXPECT_EQ(outcome.ok, 10);
}

// With a queue delay, a job that has waited it runs even when the turn is
// another client's, whose job is newer: the turn's job leads the batch at
// once rather than waiting out a delay of its own.
TEST(BatchSchedulerTest, TakingTurnsNeverHoldsADueJob) {
  FakeClock clock;
  RecordingExecutor executor;
  auto scheduler =
      BatchScheduler::Create({.max_batch_size = 16,
                              .max_queue_delay = absl::Milliseconds(10),
                              .clock = &clock},
                             &executor);
  ASSERT_TRUE(scheduler.ok());
  Outcome outcome;
  auto ready = [&](std::shared_ptr<GemmJob> job) {
    job->MarkReady(clock.Now());
    return job;
  };
  ASSERT_TRUE((*scheduler)->Submit(ready(ClientJob("a", 8, &outcome))).ok());
  clock.Advance(absl::Milliseconds(10));
  executor.WaitUntilBusy();  // a's first job runs; the turn passes to b
  ASSERT_TRUE((*scheduler)->Submit(ready(ClientJob("a", 16, &outcome))).ok());
  clock.Advance(absl::Milliseconds(9));
  ASSERT_TRUE((*scheduler)->Submit(ready(ClientJob("b", 100, &outcome))).ok());
  clock.Advance(absl::Milliseconds(1));  // a's job is due, b's is not
  executor.Release();
  // The fake clock stands still from here: only a job already due can run.
  EXPECT_TRUE(executor.WaitForBatches(3, absl::Seconds(5)))
      << "the due job waited on an idle worker";
  (*scheduler)->Stop();
  EXPECT_EQ(executor.ms(), (std::vector<uint32_t>{8, 100, 16}));
}

TEST(BatchSchedulerTest, QueuedSameShapeJobsRunAsOneBatch) {
  RecordingExecutor executor;
  auto scheduler = BatchScheduler::Create({.max_batch_size = 16}, &executor);
  ASSERT_TRUE(scheduler.ok());
  Outcome outcome;
  const Clock* clock = Clock::Real();
  ASSERT_TRUE((*scheduler)->Submit(Job(8, &outcome, clock)).ok());
  executor.WaitUntilBusy();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*scheduler)->Submit(Job(16, &outcome, clock)).ok());
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE((*scheduler)->Submit(Job(32, &outcome, clock)).ok());
  }
  executor.Release();
  (*scheduler)->Stop();
  EXPECT_EQ(executor.sizes(), (std::vector<size_t>{1, 5, 2}));
  EXPECT_EQ(outcome.ok, 8);
}

TEST(BatchSchedulerTest, BatchesNeverExceedMaxBatchSize) {
  RecordingExecutor executor;
  auto scheduler = BatchScheduler::Create({.max_batch_size = 4}, &executor);
  ASSERT_TRUE(scheduler.ok());
  Outcome outcome;
  ASSERT_TRUE((*scheduler)->Submit(Job(8, &outcome, Clock::Real())).ok());
  executor.WaitUntilBusy();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE((*scheduler)->Submit(Job(16, &outcome, Clock::Real())).ok());
  }
  executor.Release();
  (*scheduler)->Stop();
  EXPECT_EQ(executor.sizes(), (std::vector<size_t>{1, 4, 4, 2}));
  EXPECT_EQ(outcome.ok, 11);
}

TEST(BatchSchedulerTest, QueueDelayLetsABatchForm) {
  RecordingExecutor executor;
  executor.Release();  // never hold
  // A clock that never advances: the 10 s delay never runs out, so only a
  // full batch can start the launch.
  FakeClock clock;
  auto scheduler = BatchScheduler::Create({.max_batch_size = 3,
                                           .max_queue_delay = absl::Seconds(10),
                                           .clock = &clock},
                                          &executor);
  ASSERT_TRUE(scheduler.ok());
  Outcome outcome;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE((*scheduler)->Submit(Job(16, &outcome, &clock)).ok());
  }
  EXPECT_FALSE(executor.WaitForBatches(1, absl::Milliseconds(100)))
      << "a partial batch ran before its delay";
  // The third job fills the batch, which runs before Stop() (that would
  // flush a partial batch anyway) and long before the delay.
  ASSERT_TRUE((*scheduler)->Submit(Job(16, &outcome, &clock)).ok());
  EXPECT_TRUE(executor.WaitForBatches(1, absl::Seconds(5)))
      << "a full batch did not run";
  (*scheduler)->Stop();
  EXPECT_EQ(executor.sizes(), (std::vector<size_t>{3}));
  EXPECT_EQ(outcome.ok, 3);
}

TEST(BatchSchedulerTest, FullQueueAnswersUnavailable) {
  RecordingExecutor executor;
  auto scheduler = BatchScheduler::Create({.max_queued_jobs = 2}, &executor);
  ASSERT_TRUE(scheduler.ok());
  Outcome outcome;
  ASSERT_TRUE((*scheduler)->Submit(Job(8, &outcome, Clock::Real())).ok());
  executor.WaitUntilBusy();
  ASSERT_TRUE((*scheduler)->Submit(Job(8, &outcome, Clock::Real())).ok());
  ASSERT_TRUE((*scheduler)->Submit(Job(8, &outcome, Clock::Real())).ok());
  absl::Status full = (*scheduler)->Submit(Job(8, &outcome, Clock::Real()));
  EXPECT_EQ(full.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(full.message().find("queue full"), absl::string_view::npos);
  executor.Release();
  (*scheduler)->Stop();
  EXPECT_EQ(outcome.ok, 3) << "every accepted job still runs";
}

// One client that kept the queue full (a stream refills it as fast as jobs
// leave) turned every other client's unary job away with UNAVAILABLE. A
// client now holds at most three quarters of the queue.
TEST(BatchSchedulerTest, OneClientCannotFillTheWholeQueue) {
  RecordingExecutor executor;
  auto scheduler = BatchScheduler::Create({.max_queued_jobs = 8}, &executor);
  ASSERT_TRUE(scheduler.ok());
  Outcome outcome;
  ASSERT_TRUE((*scheduler)->Submit(ClientJob("a", 8, &outcome)).ok());
  executor.WaitUntilBusy();
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE((*scheduler)->Submit(ClientJob("a", 8, &outcome)).ok()) << i;
  }
  absl::Status over = (*scheduler)->Submit(ClientJob("a", 8, &outcome));
  EXPECT_EQ(over.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(over.message().find("client a has 6 jobs queued"),
            absl::string_view::npos)
      << over;
  EXPECT_TRUE((*scheduler)->Submit(ClientJob("b", 8, &outcome)).ok());
  EXPECT_TRUE((*scheduler)->Submit(ClientJob("b", 8, &outcome)).ok());
  executor.Release();
  (*scheduler)->Stop();
  EXPECT_EQ(outcome.ok, 9) << "every accepted job still runs";
}

}  // namespace
}  // namespace gemm::server::scheduler_test
