// BatchScheduler (the suite: batch_scheduler_test.cc): expired and
// cancelled jobs dropped unrun, the share they give back, Stop(), and light
// workers beside general ones.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/scheduling/batch_scheduler.h"
#include "server/scheduling/batch_scheduler_test_fixture.h"

namespace gemm::server::scheduler_test {
namespace {

TEST(BatchSchedulerTest, ExpiredAndCancelledJobsAreDroppedUnrun) {
  RecordingExecutor executor;
  FakeClock clock;
  auto scheduler = BatchScheduler::Create({.clock = &clock}, &executor);
  ASSERT_TRUE(scheduler.ok());
  Outcome busy, expired, cancelled, alive;
  ASSERT_TRUE((*scheduler)->Submit(Job(8, &busy, &clock)).ok());
  executor.WaitUntilBusy();
  ASSERT_TRUE((*scheduler)
                  ->Submit(Job(16, &expired, &clock, absl::Milliseconds(10)))
                  .ok());
  auto doomed = Job(24, &cancelled, &clock);
  ASSERT_TRUE((*scheduler)->Submit(doomed).ok());
  doomed->Cancel();
  ASSERT_TRUE(
      (*scheduler)->Submit(Job(32, &alive, &clock, absl::Seconds(60))).ok());
  clock.Advance(absl::Milliseconds(20));
  executor.Release();
  (*scheduler)->Stop();
  EXPECT_EQ(expired.last_code,
            static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(cancelled.last_code,
            static_cast<int>(absl::StatusCode::kCancelled));
  EXPECT_EQ(alive.ok, 1);
  EXPECT_EQ(executor.sizes(), (std::vector<size_t>{1, 1}))
      << "only the busy job and the live one ran";
}

// Jobs dropped unrun give their client's share of the queue back.
TEST(BatchSchedulerTest, DroppedJobsLeaveTheirClientsShare) {
  RecordingExecutor executor;
  FakeClock clock;
  auto scheduler = BatchScheduler::Create(
      {.max_queued_jobs = 4, .clock = &clock}, &executor);
  ASSERT_TRUE(scheduler.ok());
  Outcome busy, expired, later;
  ASSERT_TRUE((*scheduler)->Submit(Job(8, &busy, &clock)).ok());
  executor.WaitUntilBusy();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE((*scheduler)
                    ->Submit(Job(16, &expired, &clock, absl::Milliseconds(10)))
                    .ok());
  }
  EXPECT_EQ((*scheduler)->Submit(Job(16, &later, &clock)).code(),
            absl::StatusCode::kUnavailable)
      << "three of four is one client's share";
  clock.Advance(absl::Milliseconds(20));
  executor.Release();
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (expired.failed < 3 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(expired.failed, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE((*scheduler)->Submit(Job(16, &later, &clock)).ok()) << i;
  }
  (*scheduler)->Stop();
  EXPECT_EQ(later.ok, 3);
}

TEST(BatchSchedulerTest, AJobThatExpiresWhileItsBatchFormsDoesNotRun) {
  RecordingExecutor executor;
  executor.Release();  // never hold
  FakeClock clock;
  auto scheduler =
      BatchScheduler::Create({.max_batch_size = 16,
                              .max_queue_delay = absl::Milliseconds(50),
                              .clock = &clock},
                             &executor);
  ASSERT_TRUE(scheduler.ok());
  Outcome hurried, patient;
  ASSERT_TRUE((*scheduler)
                  ->Submit(Job(16, &hurried, &clock, absl::Milliseconds(10)))
                  .ok());
  // Let the worker start waiting for company, then let time pass beyond
  // both the job's budget and the batching delay before company arrives.
  // Kept as a real-time pause: nothing observable says the worker is
  // waiting, and should it not be yet, the job expires before its batch
  // forms instead, with the same outcome.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  clock.Advance(absl::Milliseconds(60));
  ASSERT_TRUE((*scheduler)->Submit(Job(16, &patient, &clock)).ok());
  (*scheduler)->Stop();
  EXPECT_EQ(hurried.last_code,
            static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(hurried.ok, 0);
  EXPECT_EQ(patient.ok, 1);
  EXPECT_EQ(executor.sizes(), (std::vector<size_t>{1}))
      << "only the job within its budget ran";
  EXPECT_EQ(hurried.failed, 1);
}

TEST(BatchSchedulerTest, StopFinishesAcceptedJobsAndRefusesNewOnes) {
  RecordingExecutor executor;
  auto scheduler = BatchScheduler::Create({}, &executor);
  ASSERT_TRUE(scheduler.ok());
  Outcome outcome;
  ASSERT_TRUE((*scheduler)->Submit(Job(8, &outcome, Clock::Real())).ok());
  executor.WaitUntilBusy();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE((*scheduler)->Submit(Job(16, &outcome, Clock::Real())).ok());
  }
  int accepted = 5;
  std::thread stopper([&] { (*scheduler)->Stop(); });
  // Once stopping, new jobs are refused...
  while ((*scheduler)->Submit(Job(16, &outcome, Clock::Real())).ok()) {
    ++accepted;
    std::this_thread::yield();
  }
  executor.Release();
  stopper.join();
  // ...and everything accepted ran, once (the refused job never finished).
  EXPECT_EQ(outcome.failed, 0);
  EXPECT_EQ(outcome.ok, accepted);
}

// On the CPU backend one worker ran every job: a client's long GEMM (or
// its K = 0 job with a huge C) kept every other client's small jobs
// waiting for the whole of it. A light worker takes the small ones.
TEST(BatchSchedulerTest, ALightWorkerRunsSmallJobsWhileLongOnesHoldTheRest) {
  HoldingExecutor executor;
  auto scheduler = BatchScheduler::Create(
      {.num_workers = 2, .light_workers = 1, .light = LightM}, &executor);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  Outcome outcome;
  ASSERT_TRUE((*scheduler)->Submit(ClientJob("a", 500, &outcome)).ok());
  ASSERT_TRUE((*scheduler)->Submit(ClientJob("a", 501, &outcome)).ok());
  ASSERT_TRUE(executor.WaitForStarts(1, absl::Seconds(5)));
  for (uint32_t m = 8; m < 11; ++m) {
    ASSERT_TRUE((*scheduler)->Submit(ClientJob("b", m, &outcome)).ok());
  }
  EXPECT_TRUE(executor.WaitForStarts(4, absl::Seconds(5)))
      << "small jobs waited behind a long one";
  // The light worker never takes the second long job.
  EXPECT_EQ(executor.started(), (std::vector<uint32_t>{500, 8, 9, 10}));
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (outcome.ok < 3 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(outcome.ok, 3);
  executor.Release();
  (*scheduler)->Stop();
  EXPECT_EQ(executor.started(), (std::vector<uint32_t>{500, 8, 9, 10, 501}));
  EXPECT_EQ(outcome.ok, 5);
}

// A general worker takes light jobs too, in turn; Stop() drains both kinds.
TEST(BatchSchedulerTest, GeneralWorkersTakeLightJobsAndStopDrainsAll) {
  HoldingExecutor executor;
  executor.Release();
  auto scheduler = BatchScheduler::Create(
      {.num_workers = 3, .light_workers = 1, .light = LightM}, &executor);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  Outcome outcome;
  for (uint32_t m = 1; m <= 40; ++m) {
    ASSERT_TRUE((*scheduler)
                    ->Submit(ClientJob("c", m % 2 ? m : 100 + m, &outcome))
                    .ok());
  }
  (*scheduler)->Stop();
  EXPECT_EQ(outcome.ok, 40);
  EXPECT_EQ(executor.started().size(), 40u);
}

TEST(BatchSchedulerTest, LightWorkersNeedAFunctionAndAGeneralWorker) {
  RecordingExecutor executor;
  auto all_light = BatchScheduler::Create(
      {.num_workers = 1, .light_workers = 1, .light = LightM}, &executor);
  EXPECT_EQ(all_light.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(all_light.status().message().find("fewer than num_workers"),
            std::string::npos)
      << all_light.status();
  auto no_function =
      BatchScheduler::Create({.num_workers = 2, .light_workers = 1}, &executor);
  EXPECT_EQ(no_function.status().code(), absl::StatusCode::kInvalidArgument);
  auto negative = BatchScheduler::Create(
      {.num_workers = 2, .light_workers = -1}, &executor);
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gemm::server::scheduler_test
