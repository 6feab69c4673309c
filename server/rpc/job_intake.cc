#include "server/rpc/job_intake.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
      budget_(InflightBudgetBytes(options.limits),
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

absl::StatusOr<JobRegions> JobIntake::HoldRegions(const JobSpec& spec,
                                                  const std::string& owner) {
  JobRegions held;
  if (!spec.a_region.used() && !spec.b_region.used() && !spec.c_region.used() &&
      !spec.result_region.used()) {
    return held;
  }
  if (options_.regions == nullptr || options_.regions->options().registrants ==
                                         RegionRegistry::Registrants::kNone) {
    return absl::UnimplementedError(
        "params: names a region, but this server serves no shared-memory "
        "regions (gemm-server --regions off)");
  }
  const GemmProblem& p = spec.problem;
  // The bytes each operand covers, for the overlap checks.
  struct Use {
    const char* operand;
    const RegionRef* ref;
    uint64_t bytes;
    RegionSpan* span;
    bool write;
  };
  Use uses[] = {
      {"a", &spec.a_region, 4 * p.a_elements(), &held.a, false},
      {"b", &spec.b_region, 4 * p.b_elements(), &held.b, false},
      {"c", &spec.c_region, 4 * p.c_elements(), &held.c, false},
      {"result", &spec.result_region, 4 * p.c_elements(), &held.result, true}};
  // Holds first: each checks its bytes lie in its region (no sums below
  // can overflow then).
  for (const Use& use : uses) {
    if (!use.ref->used()) continue;
    ASSIGN_OR_RETURN(*use.span,
                     options_.regions->Hold(owner, *use.ref, use.bytes,
                                            use.operand, use.write));
  }
  const Use& result = uses[3];
  for (const Use& use : uses) {
    if (!use.ref->used() || !result.ref->used() || &use == &result) continue;
    if (use.ref->region != result.ref->region) continue;
    const uint64_t begin = use.ref->offset, end = begin + use.bytes;
    const uint64_t r_begin = result.ref->offset, r_end = r_begin + result.bytes;
    const bool overlap = begin < r_end && r_begin < end;
    // C may be updated in place: exactly the same bytes.
    const bool in_place = use.span == &held.c && begin == r_begin;
    if (overlap && !in_place) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "params.result_region: bytes [%d, %d) of region %s overlap %s's "
          "[%d, %d); a result may share bytes with C only, and only all of "
          "them (in place)",
          r_begin, r_end, QuoteClientText(result.ref->region),
          absl::AsciiStrToUpper(use.operand), begin, end));
    }
  }
  return held;
}

absl::StatusOr<std::shared_ptr<GemmJob>> JobIntake::Allocate(
    const JobSpec& spec, const std::shared_ptr<ClientShare>& share) {
  ASSIGN_OR_RETURN(JobRegions regions,
                   HoldRegions(spec, share != nullptr ? share->client() : ""));
  InflightBudget::Reservation reservation;
  RETURN_IF_ERROR(budget_.Reserve(JobClaimBytes(spec), &reservation, share));
  return std::make_shared<GemmJob>(spec, std::move(reservation),
                                   options_.host_allocator, std::move(regions));
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
  absl::Status sizes = CheckOperandBytes(spec, a.size, b.size, c.size);
  if (!sizes.ok()) {
    if (operand_error_prefix.empty()) return sizes;
    return absl::Status(sizes.code(),
                        absl::StrCat(operand_error_prefix, sizes.message()));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<GemmJob> job, Allocate(spec, share));
  // The one copy of an operand byte on the server: from gRPC's slices into
  // the job's (pinned) storage.
  if (!spec.a_region.used()) a.CopyTo(reinterpret_cast<char*>(job->a()));
  if (!spec.b_region.used()) b.CopyTo(reinterpret_cast<char*>(job->b()));
  if (spec.problem.beta != 0.0f && !spec.c_region.used()) {
    c.CopyTo(reinterpret_cast<char*>(job->c_in()));
  }
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
        // A region that broke under the job spoiled its operands or result.
        if (status.ok()) status = finished.RegionsIntact();
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
