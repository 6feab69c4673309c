// The fixture of the BatchScheduler tests (batch_scheduler_test*.cc):
// executors of one kernel that record, hold or release batches, a fake
// clock, and jobs whose outcomes are counted.
//
// Thread-safety: the executors and the clock are called from the
// scheduler's workers and the test thread; each locks what it keeps.
//
//   RecordingExecutor executor;
//   FakeClock clock;
//   auto scheduler = BatchScheduler::Create({.clock = &clock}, &executor);
//   Outcome outcome;
//   (*scheduler)->Submit(Job(8, &outcome, &clock));
#ifndef GEMM_SERVER_SCHEDULING_BATCH_SCHEDULER_TEST_FIXTURE_H_
#define GEMM_SERVER_SCHEDULING_BATCH_SCHEDULER_TEST_FIXTURE_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/scheduling/batch_scheduler.h"

namespace gemm::server::scheduler_test {

// The one kernel of the tests' executors, "k".
inline KernelHandle TestKernel() {
  static const KernelTable* const table = new KernelTable({{"k"}});
  return table->at(0);
}

// An executor of one kernel, "k", whose Execute is the test's.
class TestExecutor : public Executor {
 public:
  absl::string_view backend() const override { return "test"; }
  std::vector<DeviceDescription> devices() const override { return {}; }
  std::vector<std::string> kernels() const override { return {"k"}; }
  absl::StatusOr<KernelHandle> ResolveKernel(
      const GemmProblem&, absl::string_view,
      Precision = Precision::kFp32) const override {
    return TestKernel();
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

inline std::shared_ptr<GemmJob> Job(
    uint32_t m, Outcome* outcome, const Clock* clock,
    absl::Duration timeout = absl::ZeroDuration()) {
  auto job = std::make_shared<GemmJob>(
      JobSpec{.problem = {m, 4, 4}, .kernel = TestKernel(), .timeout = timeout},
      InflightBudget::Reservation());
  job->set_done_callback([outcome](GemmJob&, absl::Status s) {
    (s.ok() ? outcome->ok : outcome->failed)++;
    if (!s.ok()) outcome->last_code = static_cast<int>(s.code());
  });
  job->MarkReady(clock->Now());
  return job;
}

// A job of `client`'s (its share names it).
inline std::shared_ptr<GemmJob> ClientJob(const std::string& client, uint32_t m,
                                          Outcome* outcome) {
  auto job = std::make_shared<GemmJob>(
      JobSpec{.problem = {m, 4, 4}, .kernel = TestKernel()},
      InflightBudget::Reservation(nullptr, 0,
                                  std::make_shared<ClientShare>(client, 0, 0)));
  job->set_done_callback([outcome](GemmJob&, absl::Status s) {
    (s.ok() ? outcome->ok : outcome->failed)++;
  });
  job->MarkReady(Clock::Real()->Now());
  return job;
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

inline bool LightM(const GemmJob& job) { return job.problem().m < 100; }

}  // namespace gemm::server::scheduler_test

#endif  // GEMM_SERVER_SCHEDULING_BATCH_SCHEDULER_TEST_FIXTURE_H_
