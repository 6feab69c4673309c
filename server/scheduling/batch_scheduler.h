// BatchScheduler: the dynamic batcher between the RPC edge and an Executor.
//
// Jobs wait in a bounded queue. A worker takes the oldest job of the next
// client in turn (clients take turns in name order, GemmJob::client(), so
// that one client's queued work cannot hold another's jobs back behind all
// of it; with one client the queue is FIFO) and gathers queued jobs that
// can share its launch (GemmProblem::SameBatchAs), whoever sent them;
// the batch runs once it holds max_batch_size jobs or any queued job has
// waited max_queue_delay, as in Triton's dynamic batcher and TensorFlow
// Serving's batch scheduler. Light workers (Options::light_workers) take
// only light jobs, in the same turns, so that a long job cannot keep the
// short ones of other clients from a worker. Jobs whose deadline passed or
// whose caller cancelled are dropped before they run. Stop() refuses new
// jobs and finishes every accepted one.
//
// Thread-safety: thread-safe.
//
//   ASSIGN_OR_RETURN(auto scheduler, BatchScheduler::Create(options,
//   executor)); RETURN_IF_ERROR(scheduler->Submit(job));  // job->Finish() runs
//   later scheduler->Stop();                         // drains
#ifndef GEMM_SERVER_SCHEDULING_BATCH_SCHEDULER_H_
#define GEMM_SERVER_SCHEDULING_BATCH_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/core/executor.h"
#include "server/core/gemm_job.h"

namespace gemm::server {

// Time source, injectable so that tests of delays and deadlines are exact.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  static const Clock* Real();
};

class BatchScheduler {
 public:
  struct Options {
    // Most jobs in one batch. Default 16.
    uint32_t max_batch_size = 16;
    // Longest the oldest job of a partial batch waits for company. Default
    // 0: a lone job runs at once, and batches form only from jobs that
    // queued while the executor was busy.
    absl::Duration max_queue_delay = absl::ZeroDuration();
    // Jobs that may wait in the queue; beyond that Submit() answers
    // UNAVAILABLE. One client (GemmJob::client()) may hold at most
    // max_queued_jobs - max_queued_jobs / 4 of them, so that a client
    // keeping the queue full cannot turn every other client's job away.
    // Default 1024.
    uint32_t max_queued_jobs = 1024;
    // Worker threads, i.e. batches executing at once. Default 1.
    int num_workers = 1;
    // Of num_workers, those that take only light jobs (`light`), so that a
    // light job never waits for a worker behind long ones: the CPU backend
    // runs small GEMMs between the tiles of a large one. Fewer than
    // num_workers. Default 0.
    int light_workers = 0;
    // Whether a job is light; required when light_workers is above 0.
    std::function<bool(const GemmJob&)> light;
    // Defaults to Clock::Real().
    const Clock* clock = nullptr;
  };

  static absl::StatusOr<std::unique_ptr<BatchScheduler>> Create(
      const Options& options, Executor* executor);
  ~BatchScheduler();  // Stop()s.

  // Queues a complete job (MarkReady() already called). UNAVAILABLE when the
  // queue is full or the scheduler is stopping; the job is then untouched
  // and the caller still owns its completion.
  absl::Status Submit(std::shared_ptr<GemmJob> job);

  // Refuses new jobs from now on; jobs already accepted still run, at once,
  // without waiting for their batches to fill. Does not block.
  void StopAccepting();
  // StopAccepting(), then waits until every accepted job has finished.
  void Stop();

  // False once StopAccepting() has run.
  bool accepting() const;
  const Options& options() const { return options_; }
  size_t queued() const;

 private:
  BatchScheduler(const Options& options, Executor* executor);
  // A worker's loop; a light one takes only light jobs.
  void WorkerLoop(bool light_only);
  // Takes the next batch off the queue, waiting as the options say; an
  // empty batch means the worker should exit.
  Batch NextBatch(bool light_only) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The queue's position of the next batch's first job: the oldest job (of
  // those a light worker may take, for one) of the client after
  // last_client_ in name order (wrapping). Needs one such job queued.
  size_t LeadIndex(bool light_only) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a worker (a light one, or any) has a job it may take.
  bool QueuedFor(bool light_only) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker's wait: until it has a job to take (QueuedFor) or the
  // scheduler stops.
  struct Waiter {
    const BatchScheduler* self;
    bool light_only;
  };
  static absl::Condition HasWork(const Waiter* waiter);
  bool IsLight(const GemmJob& job) const {
    return options_.light_workers > 0 && options_.light(job);
  }
  // Takes the job at `it` off the queue.
  std::deque<std::shared_ptr<GemmJob>>::iterator Unqueue(
      std::deque<std::shared_ptr<GemmJob>>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops expired and cancelled jobs from the queue; returns them.
  std::vector<std::pair<std::shared_ptr<GemmJob>, absl::Status>> DropDead()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  Executor* const executor_;
  const Clock* const clock_;

  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<GemmJob>> queue_ ABSL_GUARDED_BY(mu_);
  // Light jobs in queue_.
  size_t light_queued_ ABSL_GUARDED_BY(mu_) = 0;
  // Each client's jobs in queue_ (clients with none are left out).
  std::map<std::string, size_t> client_queued_ ABSL_GUARDED_BY(mu_);
  // The client of the last batch's first job.
  std::string last_client_ ABSL_GUARDED_BY(mu_);
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_SCHEDULING_BATCH_SCHEDULER_H_
