#include "server/job_intake.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace gemm::server {

JobIntake::Call JobIntake::CallOf(grpc::CallbackServerContext* context) {
  Call call;
  const auto deadline = context->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    call.deadline = absl::FromChrono(deadline);
  }
  call.cancelled = [context] { return context->IsCancelled(); };
  return call;
}

JobIntake::JobIntake(const Options& options, Executor* executor,
                     BatchScheduler* scheduler)
    : options_(options),
      executor_(executor),
      scheduler_(scheduler),
      budget_(options.limits.max_inflight_bytes) {}

absl::StatusOr<JobSpec> JobIntake::Validate(
    const v1::GemmParams& params) const {
  return ValidateParams(params, options_.limits, *executor_);
}

absl::StatusOr<std::shared_ptr<GemmJob>> JobIntake::Allocate(
    const JobSpec& spec) {
  InflightBudget::Reservation reservation;
  RETURN_IF_ERROR(budget_.Reserve(spec.problem.total_bytes(), &reservation));
  return std::make_shared<GemmJob>(spec, std::move(reservation),
                                   options_.host_allocator);
}

absl::StatusOr<std::shared_ptr<GemmJob>> JobIntake::AdmitComplete(
    const v1::GemmParams& params, const wire::Pieces& a, const wire::Pieces& b,
    const wire::Pieces& c, absl::string_view operand_error_prefix) {
  ASSIGN_OR_RETURN(JobSpec spec, Validate(params));
  return AdmitComplete(spec, a, b, c, operand_error_prefix);
}

absl::StatusOr<std::shared_ptr<GemmJob>> JobIntake::AdmitComplete(
    const JobSpec& spec, const wire::Pieces& a, const wire::Pieces& b,
    const wire::Pieces& c, absl::string_view operand_error_prefix) {
  absl::Status sizes = CheckOperandBytes(spec.problem, a.size, b.size, c.size);
  if (!sizes.ok()) {
    if (operand_error_prefix.empty()) return sizes;
    return absl::Status(sizes.code(),
                        absl::StrCat(operand_error_prefix, sizes.message()));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<GemmJob> job, Allocate(spec));
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
  job->set_done_callback(std::move(done));
  absl::Status queued = scheduler_->Submit(job);
  // Not queued: nothing will finish the job, so its callback (which may
  // hold the caller's state) goes now.
  if (!queued.ok()) job->set_done_callback(nullptr);
  return queued;
}

}  // namespace gemm::server
