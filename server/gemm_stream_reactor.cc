#include "server/gemm_stream_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gemm::server {

using wire::DecodedRequest;

GemmStreamReactor::GemmStreamReactor(JobIntake* intake, const Options& options,
                                     grpc::CallbackServerContext* context)
    : intake_(intake),
      options_(options),
      context_(context),
      outbox_(options.result_chunk_bytes, &intake->counts()) {
  StartRead(&request_);
}

void GemmStreamReactor::OnReadDone(bool ok) {
  if (!ok) {
    {
      absl::MutexLock lock(&mu_);
      OnReadsDone();
    }
    Pump();
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    absl::Status decoded = wire::DecodeStreamRequest(request_, &decoded_);
    if (decoded.ok()) {
      HandleRequest(decoded_);
    } else {
      // Not attributable to a job for sure; reported under the id the
      // message carried, if any, and the stream goes on.
      outbox_.PushRejected(decoded_.header.job_id(), std::move(decoded));
    }
    // Lets go of the received bytes now, not at the next read.
    decoded_.data = decoded_.job_a = decoded_.job_b = decoded_.job_c =
        wire::Pieces();
    decoded_.slices.clear();
  }
  request_.Clear();
  Pump();
  StartRead(&request_);
}

void GemmStreamReactor::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) write_failed_ = true;
  }
  Pump();
}

void GemmStreamReactor::OnCancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  for (auto& [id, assembly] : receiving_) assembly.job().Cancel();
  for (const auto& job : running_) job->Cancel();
}

void GemmStreamReactor::OnDone() {
  // A scheduler thread that decided kNone may still be leaving mu_.
  { absl::MutexLock lock(&mu_); }
  delete this;
}

void GemmStreamReactor::OnReadsDone() {
  reads_done_ = true;
  // Jobs the client started but never ended can no longer complete.
  for (auto& [id, assembly] : receiving_) {
    (void)assembly;
    outbox_.PushRejected(
        id, absl::InvalidArgumentError(absl::StrCat(
                "job_id ", id, ": stream closed before the job's end_of_job")));
  }
  receiving_.clear();
}

void GemmStreamReactor::FailJob(uint64_t id, absl::Status status, bool ended) {
  receiving_.erase(id);
  if (!ended) {
    // A client that stops sending a failed job never ends it; keep the set
    // of such ids bounded (a forgotten id only means its stray parts get an
    // error of their own).
    if (discarding_.size() >= kMaxDiscarding) discarding_.clear();
    discarding_.insert(id);
  }
  outbox_.PushRejected(id, std::move(status));
}

void GemmStreamReactor::HandleRequest(const DecodedRequest& in) {
  const v1::StreamRequest& req = in.header;
  const uint64_t id = req.job_id();
  if (in.has_job) return HandleWholeJob(in);
  const bool ended = req.end_of_job();
  if (discarding_.count(id) > 0 && !req.has_params()) {
    if (ended) discarding_.erase(id);
    return;
  }
  discarding_.erase(id);
  auto it = receiving_.find(id);
  if (req.has_params()) {
    if (it != receiving_.end()) {
      return FailJob(
          id,
          absl::InvalidArgumentError(absl::StrCat(
              "job_id ", id, ": params sent again while the job is open")),
          ended);
    }
    absl::StatusOr<JobSpec> spec = intake_->Validate(req.params());
    if (!spec.ok()) return FailJob(id, spec.status(), ended);
    absl::StatusOr<std::shared_ptr<GemmJob>> job = intake_->Allocate(*spec);
    if (!job.ok()) return FailJob(id, job.status(), ended);
    it = receiving_
             .emplace(id, JobAssembly(id, std::move(*job),
                                      req.params().inline_result_max_bytes()))
             .first;
  } else if (it == receiving_.end()) {
    return FailJob(id,
                   absl::InvalidArgumentError(absl::StrCat(
                       "job_id ", id,
                       ": data for a job that was not started; its first "
                       "message must carry params")),
                   ended);
  }
  JobAssembly& assembly = it->second;
  if (in.data.size > 0) {
    absl::Status s = assembly.Append(in);
    if (!s.ok()) return FailJob(id, std::move(s), ended);
  }
  if (!ended) return;

  absl::Status complete = assembly.CheckComplete();
  const uint64_t inline_max = assembly.inline_result_max_bytes();
  std::shared_ptr<GemmJob> job = assembly.TakeJob();
  receiving_.erase(it);
  if (!complete.ok()) return outbox_.PushRejected(id, std::move(complete));
  Submit(id, std::move(job), inline_max);
}

void GemmStreamReactor::HandleWholeJob(const DecodedRequest& in) {
  const v1::StreamRequest& req = in.header;
  const uint64_t id = req.job_id();
  discarding_.erase(id);
  const v1::GemmRequest& whole = in.job;
  auto fail = [&](absl::Status status) {
    FailJob(id, std::move(status), /*ended=*/true);
  };
  if (receiving_.count(id) > 0) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "job_id ", id, ": job: sent while the job is already open")));
  }
  if (req.has_params() || req.operand() != v1::OPERAND_UNSPECIFIED ||
      req.offset() != 0 || in.data.size > 0) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "job_id ", id,
        ": job: a whole-job message must not also carry params, operand, "
        "offset or data")));
  }
  if (!whole.has_params()) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("job_id ", id, ": job.params: missing")));
  }
  // One copy of each operand into the job's (pinned) storage, no
  // reassembly.
  absl::StatusOr<std::shared_ptr<GemmJob>> job =
      intake_->AdmitComplete(whole.params(), in.job_a, in.job_b, in.job_c,
                             absl::StrCat("job_id ", id, ": "));
  if (!job.ok()) return fail(job.status());
  Submit(id, std::move(*job), whole.params().inline_result_max_bytes());
}

void GemmStreamReactor::Submit(uint64_t id, std::shared_ptr<GemmJob> job,
                               uint64_t inline_result_max_bytes) {
  const bool inline_result =
      outbox_.FitsInline(job->problem(), inline_result_max_bytes);
  // Counted before the job can finish: OnJobDone waits for mu_, held here.
  running_.insert(job);
  ++pending_;
  // The context lives as long as this reactor, which outlives its jobs.
  absl::Status s = intake_->Submit(
      job, JobIntake::CallOf(context_),
      [this, id, inline_result](GemmJob& done, absl::Status status) {
        OnJobDone(id, inline_result, done, std::move(status));
      });
  if (!s.ok()) {
    running_.erase(job);
    --pending_;
    outbox_.PushRejected(id, std::move(s));
  }
}

// The reactor stays alive meanwhile: Finish() waits for pending_ to reach 0.
void GemmStreamReactor::OnJobDone(uint64_t id, bool inline_result, GemmJob& job,
                                  absl::Status status) {
  Next next;
  grpc::Status final_status;
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<GemmJob> owned;
    for (auto it = running_.begin(); it != running_.end(); ++it) {
      if (it->get() == &job) {
        owned = *it;
        running_.erase(it);
        break;
      }
    }
    --pending_;
    if (status.ok()) {
      outbox_.PushResult(id, std::move(owned), inline_result);
    } else {
      outbox_.PushFailed(id, std::move(status));
    }
    // Decided in the same critical section that lowered pending_: once it
    // is unlocked, a gRPC thread may finish the call and delete this
    // reactor, so after kNone this thread must not touch it again.
    next = DecideLocked(&final_status);
  }
  Act(next, final_status);
}

GemmStreamReactor::Next GemmStreamReactor::DecideLocked(
    grpc::Status* final_status) {
  if (finished_ || writing_) return Next::kNone;
  if (write_failed_ || cancelled_) outbox_.Clear();
  if (!outbox_.empty()) {
    response_ = outbox_.Next();
    writing_ = true;  // holds off Finish() until OnWriteDone
    // Set while no write is in flight; read by Act() for this write only.
    write_options_ = grpc::WriteOptions();
    if (options_.coalesce_small_writes && !outbox_.empty() &&
        response_.Length() <= wire::kCoalesceMaxBytes) {
      // The next message follows at once (OnWriteDone), and the last of a
      // run goes without the hint, so nothing waits for long.
      write_options_.set_buffer_hint();
    }
    return Next::kWrite;
  }
  if (reads_done_ && pending_ == 0) {
    finished_ = true;
    *final_status =
        cancelled_ || write_failed_
            ? grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled")
            : grpc::Status::OK;
    return Next::kFinish;
  }
  return Next::kNone;
}

void GemmStreamReactor::Act(Next next, const grpc::Status& final_status) {
  if (next == Next::kWrite) StartWrite(&response_, write_options_);
  if (next == Next::kFinish) Finish(final_status);
}

// Called from reactions (OnReadDone, OnWriteDone), during which gRPC keeps
// the reactor alive.
void GemmStreamReactor::Pump() {
  grpc::Status final_status;
  Next next;
  {
    absl::MutexLock lock(&mu_);
    next = DecideLocked(&final_status);
  }
  Act(next, final_status);
}

}  // namespace gemm::server
