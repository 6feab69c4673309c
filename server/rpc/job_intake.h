// JobIntake: the one admission sequence of the service, shared by the unary
// Gemm call and GemmStream.
//
// A job is admitted in this order: its params are validated and its kernel
// resolved (validation.h); a complete job's operand byte counts are checked;
// its bytes are claimed from the in-flight budget (UNAVAILABLE when full);
// its host storage is allocated (pinned on the CUDA backend) and, for a
// complete job, its operands are copied in, once; finally the call's
// deadline and cancellation are attached, the job is marked ready and it is
// handed to the BatchScheduler. A streamed job stops after the allocation,
// receives its chunks (JobAssembly) and rejoins at Submit(). The intake also
// holds Info's job counters (JobCounts), which both calls keep.
//
// Thread-safety: thread-safe; gRPC calls it from its own threads.
//
//   JobIntake intake(options, &executor, &scheduler);
//   JobIntake::Call call = intake.CallOf(context, client);
//   ASSIGN_OR_RETURN(auto job, intake.AdmitComplete(params, a, b, c, "",
//                                                   call.share));
//   RETURN_IF_ERROR(intake.Submit(job, call, done));
#ifndef GEMM_SERVER_RPC_JOB_INTAKE_H_
#define GEMM_SERVER_RPC_JOB_INTAKE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/gemm.pb.h"
#include "proto/wire_codec.h"
#include "server/admission/validation.h"
#include "server/core/client_shares.h"
#include "server/core/executor.h"
#include "server/core/gemm_job.h"
#include "server/observability/job_counts.h"
#include "server/observability/job_event_log.h"
#include "server/regions/region_registry.h"
#include "server/scheduling/batch_scheduler.h"

namespace gemm::server {

class JobIntake {
 public:
  struct Options {
    ServiceLimits limits;
    // Host storage of new jobs (pinned memory on the CUDA backend); must
    // outlive the intake. Default nullptr: the heap.
    HostAllocator* host_allocator = nullptr;
    // Each client's part of the budget and of the jobs (client_shares.h).
    // Default: no per-client limits.
    ClientShares::Options client_shares;
    // Where JobCounts also counts (server_metrics.h); must outlive the
    // intake. Default nullptr: Info's counts only.
    ServerMetrics* metrics = nullptr;
    // The callers' regions (region_registry.h); must outlive the intake.
    // Default nullptr: a job naming a region is refused.
    RegionRegistry* regions = nullptr;
  };

  // What a job takes from the RPC that brought it.
  struct Call {
    // The call's gRPC deadline. Default: none.
    absl::Time deadline = absl::InfiniteFuture();
    // Polled by the scheduler; true once the caller went away. Default
    // empty: never.
    std::function<bool()> cancelled;
    // The caller's share (client_shares.h). Default null: no per-client
    // limit.
    std::shared_ptr<ClientShare> share;
  };
  // The deadline, cancellation and share (of `client`, its identity:
  // call_auth.h) of a gRPC call; `context` must outlive the jobs submitted
  // with the result.
  Call CallOf(grpc::CallbackServerContext* context, const std::string& client);

  // `executor` and `scheduler` must outlive the intake.
  JobIntake(const Options& options, Executor* executor,
            BatchScheduler* scheduler);
  ~JobIntake();  // joins the wake thread; no wait may be pending

  // Validates `params` and resolves the kernel: the job's spec.
  absl::StatusOr<JobSpec> Validate(const v1::GemmParams& params) const;

  // Takes holds on the regions `spec` names (of `share`'s client), claims
  // its bytes (JobClaimBytes) from the in-flight budget and from `share`
  // (when not null), and allocates the job's (uninitialized) host storage
  // for the operands not in regions.
  absl::StatusOr<std::shared_ptr<GemmJob>> Allocate(
      const JobSpec& spec, const std::shared_ptr<ClientShare>& share = nullptr);

  // A job whose params and operands all arrived in one message: Validate,
  // check the operand byte counts, Allocate and copy the operands in (C
  // only when beta is not 0). An operand-count error's message starts with
  // `operand_error_prefix` (the stream names the job there; the other
  // errors name their field already).
  absl::StatusOr<std::shared_ptr<GemmJob>> AdmitComplete(
      const v1::GemmParams& params, const wire::Pieces& a,
      const wire::Pieces& b, const wire::Pieces& c,
      absl::string_view operand_error_prefix = "",
      const std::shared_ptr<ClientShare>& share = nullptr);
  // The same for params already validated into `spec`.
  absl::StatusOr<std::shared_ptr<GemmJob>> AdmitComplete(
      const JobSpec& spec, const wire::Pieces& a, const wire::Pieces& b,
      const wire::Pieces& c, absl::string_view operand_error_prefix = "",
      const std::shared_ptr<ClientShare>& share = nullptr);

  // Attaches `call`'s deadline and cancellation and `done` to a job whose
  // operands are all in place, marks it ready and queues it. On an error
  // (UNAVAILABLE: queue full or shutting down) the job is untouched by the
  // scheduler and `done` will not run.
  absl::Status Submit(const std::shared_ptr<GemmJob>& job, const Call& call,
                      GemmJob::DoneCallback done);

  // False once the scheduler stops accepting jobs (server shutdown).
  bool accepting() const { return scheduler_->accepting(); }

  // Flow control. Room in the in-flight budget or the queue may free up
  // whenever a job finishes or gives back its bytes; each such moment, and
  // each NotifyCapacity(), starts a new capacity epoch.
  uint64_t capacity_epoch() const { return epoch_.load(); }
  // `wake` runs once, on the intake's own thread with no lock held, at the
  // next new epoch, or soon when the epoch is already past `seen_epoch` (an
  // epoch read before the attempt that found no room). Returns a ticket for
  // CancelWait().
  uint64_t WaitForCapacity(uint64_t seen_epoch, std::function<void()> wake);
  // Withdraws a wait; false when its `wake` has run or is running.
  bool CancelWait(uint64_t ticket);
  // Starts a new epoch: every waiting `wake` runs (and is forgotten).
  void NotifyCapacity();

  // The log of refused and failed jobs (job_event_log.h).
  JobEventLog& events() { return events_; }

  // Info's counters; each call counts its own jobs' answers.
  JobCounts& counts() { return counts_; }
  const JobCounts& counts() const { return counts_; }

  const ServiceLimits& limits() const { return options_.limits; }
  // Null when the service has none.
  RegionRegistry* regions() const { return options_.regions; }
  const InflightBudget& budget() const { return budget_; }
  ClientShares& shares() { return shares_; }

 private:
  const Options options_;
  Executor* const executor_;
  BatchScheduler* const scheduler_;
  InflightBudget budget_;
  ClientShares shares_;
  JobCounts counts_;
  JobEventLog events_;

  // Runs wakes, one epoch at a time.
  void WakeLoop();
  // Holds on the regions `spec` names, of `owner`.
  absl::StatusOr<JobRegions> HoldRegions(const JobSpec& spec,
                                         const std::string& owner);

  std::atomic<uint64_t> epoch_{0};
  absl::Mutex waiters_mu_;
  std::map<uint64_t, std::function<void()>> waiters_
      ABSL_GUARDED_BY(waiters_mu_);
  uint64_t next_ticket_ ABSL_GUARDED_BY(waiters_mu_) = 1;
  bool wake_due_ ABSL_GUARDED_BY(waiters_mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(waiters_mu_) = false;
  // waiters_.size(), read without the lock on every job's end.
  std::atomic<size_t> waiting_{0};
  std::thread wake_thread_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_RPC_JOB_INTAKE_H_
