#include "server/batch_scheduler.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace gemm::server {
namespace {

// An executor of one kernel, "k", whose Execute is the test's.
class TestExecutor : public Executor {
 public:
  absl::string_view backend() const override { return "test"; }
  std::vector<DeviceDescription> devices() const override { return {}; }
  std::vector<std::string> kernels() const override { return {"k"}; }
  absl::StatusOr<std::string> ResolveKernel(
      const GemmProblem&, absl::string_view,
      Precision = Precision::kFp32) const override {
    return std::string("k");
  }
};

// Records the batches it is given; holds the first one until released, so
// that tests can queue jobs behind a busy executor. (Scheduling is what is
// under test here; cpu_executor_test covers the arithmetic.)
class RecordingExecutor final : public TestExecutor {
 public:
  absl::Status Execute(const Batch& batch) override {
    if (!started_.HasBeenNotified()) {
      started_.Notify();
      release_.WaitForNotification();
    }
    absl::MutexLock lock(&mu_);
    sizes_.push_back(batch.size());
    for (const auto& job : batch) ms_.push_back(job->problem().m);
    return absl::OkStatus();
  }
  void WaitUntilBusy() { started_.WaitForNotification(); }
  // True once `n` batches have run, false after `timeout` (real time).
  bool WaitForBatches(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto done = [this, n]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return sizes_.size() >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }
  void Release() { release_.Notify(); }
  std::vector<size_t> sizes() {
    absl::MutexLock lock(&mu_);
    return sizes_;
  }
  // Each job's M, in the order the jobs ran.
  std::vector<uint32_t> ms() {
    absl::MutexLock lock(&mu_);
    return ms_;
  }

 private:
  absl::Notification started_, release_;
  absl::Mutex mu_;
  std::vector<size_t> sizes_;
  std::vector<uint32_t> ms_;
};

class FakeClock final : public Clock {
 public:
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::FromUnixSeconds(1'000'000);
};

struct Outcome {
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  std::atomic<int> last_code{0};
};

std::shared_ptr<GemmJob> Job(uint32_t m, Outcome* outcome, const Clock* clock,
                             absl::Duration timeout = absl::ZeroDuration()) {
  auto job = std::make_shared<GemmJob>(
      JobSpec{.problem = {m, 4, 4}, .kernel = "k", .timeout = timeout},
      InflightBudget::Reservation());
  job->set_done_callback([outcome](GemmJob&, absl::Status s) {
    (s.ok() ? outcome->ok : outcome->failed)++;
    if (!s.ok()) outcome->last_code = static_cast<int>(s.code());
  });
  job->MarkReady(clock->Now());
  return job;
}

// A job of `client`'s (its share names it).
std::shared_ptr<GemmJob> ClientJob(const std::string& client, uint32_t m,
                                   Outcome* outcome) {
  auto job = std::make_shared<GemmJob>(
      JobSpec{.problem = {m, 4, 4}, .kernel = "k"},
      InflightBudget::Reservation(nullptr, 0,
                                  std::make_shared<ClientShare>(client, 0, 0)));
  job->set_done_callback([outcome](GemmJob&, absl::Status s) {
    (s.ok() ? outcome->ok : outcome->failed)++;
  });
  job->MarkReady(Clock::Real()->Now());
  return job;
}

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

// Holds every heavy batch (M of 100 or more) until released; records the
// M of each job as its batch starts.
class HoldingExecutor final : public TestExecutor {
 public:
  absl::Status Execute(const Batch& batch) override {
    absl::MutexLock lock(&mu_);
    for (const auto& job : batch) started_.push_back(job->problem().m);
    if (batch.front()->problem().m >= 100) {
      mu_.Await(absl::Condition(&released_));
    }
    return absl::OkStatus();
  }
  // True once `n` jobs have started, false after `timeout`.
  bool WaitForStarts(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto done = [this, n]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return started_.size() >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }
  std::vector<uint32_t> started() {
    absl::MutexLock lock(&mu_);
    return started_;
  }

 private:
  absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<uint32_t> started_ ABSL_GUARDED_BY(mu_);
};

bool LightM(const GemmJob& job) { return job.problem().m < 100; }

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
}  // namespace gemm::server
