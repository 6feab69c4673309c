#include "server/job_intake.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace gemm::server {
namespace {

// A share always holds the largest job.
ClientShares::Options SharesFor(const JobIntake::Options& options) {
  ClientShares::Options shares = options.client_shares;
  if (shares.max_bytes_per_client > 0) {
    shares.max_bytes_per_client = std::max(
        shares.max_bytes_per_client, LargestJobClaimBytes(options.limits));
  }
  return shares;
}

}  // namespace

JobIntake::Call JobIntake::CallOf(grpc::CallbackServerContext* context,
                                  const std::string& client) {
  Call call;
  const auto deadline = context->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    call.deadline = absl::FromChrono(deadline);
  }
  call.cancelled = [context] { return context->IsCancelled(); };
  call.share = shares_.ShareOf(client);
  return call;
}

JobIntake::JobIntake(const Options& options, Executor* executor,
                     BatchScheduler* scheduler)
    : options_(options),
      executor_(executor),
      scheduler_(scheduler),
      budget_(std::max(options.limits.max_inflight_bytes,
                       LargestJobClaimBytes(options.limits)),
              [this] { NotifyCapacity(); }),
      shares_(SharesFor(options)),
      counts_(options.metrics) {
  wake_thread_ = std::thread([this] { WakeLoop(); });
}

JobIntake::~JobIntake() {
  {
    absl::MutexLock lock(&waiters_mu_);
    stopping_ = true;
  }
  wake_thread_.join();
}

absl::StatusOr<JobSpec> JobIntake::Validate(
    const v1::GemmParams& params) const {
  return ValidateParams(params, options_.limits, *executor_);
}

absl::StatusOr<std::shared_ptr<GemmJob>> JobIntake::Allocate(
    const JobSpec& spec, const std::shared_ptr<ClientShare>& share) {
  InflightBudget::Reservation reservation;
  RETURN_IF_ERROR(
      budget_.Reserve(JobClaimBytes(spec.problem), &reservation, share));
  return std::make_shared<GemmJob>(spec, std::move(reservation),
                                   options_.host_allocator);
}

absl::StatusOr<std::shared_ptr<GemmJob>> JobIntake::AdmitComplete(
    const v1::GemmParams& params, const wire::Pieces& a, const wire::Pieces& b,
    const wire::Pieces& c, absl::string_view operand_error_prefix,
    const std::shared_ptr<ClientShare>& share) {
  ASSIGN_OR_RETURN(JobSpec spec, Validate(params));
  return AdmitComplete(spec, a, b, c, operand_error_prefix, share);
}

absl::StatusOr<std::shared_ptr<GemmJob>> JobIntake::AdmitComplete(
    const JobSpec& spec, const wire::Pieces& a, const wire::Pieces& b,
    const wire::Pieces& c, absl::string_view operand_error_prefix,
    const std::shared_ptr<ClientShare>& share) {
  absl::Status sizes = CheckOperandBytes(spec.problem, a.size, b.size, c.size);
  if (!sizes.ok()) {
    if (operand_error_prefix.empty()) return sizes;
    return absl::Status(sizes.code(),
                        absl::StrCat(operand_error_prefix, sizes.message()));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<GemmJob> job, Allocate(spec, share));
  // The one copy of an operand byte on the server: from gRPC's slices into
  // the job's (pinned) storage.
  a.CopyTo(reinterpret_cast<char*>(job->a()));
  b.CopyTo(reinterpret_cast<char*>(job->b()));
  if (spec.problem.beta != 0.0f) c.CopyTo(reinterpret_cast<char*>(job->c()));
  return job;
}

absl::Status JobIntake::Submit(const std::shared_ptr<GemmJob>& job,
                               const Call& call, GemmJob::DoneCallback done) {
  job->set_call_deadline(call.deadline);
  job->set_cancel_check(call.cancelled);
  job->MarkReady(absl::Now());
  // A finished job has left the queue: a stream waiting for room may go on.
  job->set_done_callback(
      [this, done = std::move(done)](GemmJob& finished, absl::Status status) {
        done(finished, std::move(status));
        NotifyCapacity();
      });
  absl::Status queued = scheduler_->Submit(job);
  // Not queued: nothing will finish the job, so its callback (which may
  // hold the caller's state) goes now.
  if (!queued.ok()) job->set_done_callback(nullptr);
  return queued;
}

uint64_t JobIntake::WaitForCapacity(uint64_t seen_epoch,
                                    std::function<void()> wake) {
  absl::MutexLock lock(&waiters_mu_);
  const uint64_t ticket = next_ticket_++;
  waiters_.emplace(ticket, std::move(wake));
  waiting_.store(waiters_.size());
  // Room freed up between the caller's attempt and now: no wake would come.
  if (epoch_.load() != seen_epoch) wake_due_ = true;
  return ticket;
}

bool JobIntake::CancelWait(uint64_t ticket) {
  absl::MutexLock lock(&waiters_mu_);
  const bool removed = waiters_.erase(ticket) > 0;
  waiting_.store(waiters_.size());
  return removed;
}

void JobIntake::NotifyCapacity() {
  // Paired with WaitForCapacity: either it sees the new epoch, or this sees
  // its waiter.
  epoch_.fetch_add(1);
  if (waiting_.load() == 0) return;
  absl::MutexLock lock(&waiters_mu_);
  wake_due_ = true;
}

// Wakes run here, never on the thread that freed the room: that thread may
// hold a stream's lock, and a wake takes one.
void JobIntake::WakeLoop() {
  while (true) {
    std::map<uint64_t, std::function<void()>> woken;
    {
      absl::MutexLock lock(&waiters_mu_);
      waiters_mu_.Await(absl::Condition(
          +[](JobIntake* self)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->waiters_mu_) {
                 return self->wake_due_ || self->stopping_;
               },
          this));
      if (!wake_due_ && stopping_) return;
      wake_due_ = false;
      woken.swap(waiters_);
      waiting_.store(0);
    }
    for (auto& [ticket, wake] : woken) {
      (void)ticket;
      wake();
    }
  }
}

}  // namespace gemm::server
