#include "server/rpc/stream_session.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gemm::server {

StreamSession::StreamSession(JobIntake* intake, const Options& options,
                             JobIntake::Call call, JobDone job_done)
    : intake_(intake),
      options_(options),
      call_(std::move(call)),
      job_done_(std::move(job_done)),
      outbox_(options.result_chunk_bytes, &intake->counts(), &intake->events(),
              call_.share != nullptr ? call_.share->client() : "") {}

StreamSession::Next StreamSession::OnMessage(const grpc::ByteBuffer& buffer) {
  ++messages_;
  absl::Status decoded = wire::DecodeStreamRequest(buffer, &message_);
  if (stopped_) {
    // Read before the stop took effect (a drain with a read in flight). A
    // job it starts gets its answer; anything else is dropped.
    const v1::StreamRequest& req = message_.header;
    if (decoded.ok() && !cancelled_ && (message_.has_job || req.has_params()) &&
        !IsOpen(req.job_id())) {
      outbox_.PushRejected(
          req.job_id(),
          absl::Status(stop_job_code_, absl::StrCat("job_id ", req.job_id(),
                                                    ": ", stop_job_reason_)));
    }
    ReleaseMessage();
    return Next::kStopReading;
  }
  if (!decoded.ok()) {
    ReleaseMessage();
    StopReading(absl::InvalidArgumentError(absl::StrCat(
                    "message ", messages_, " of the stream: ",
                    decoded.message(), "; no later message was read")),
                absl::StatusCode::kAborted);
    return Next::kStopReading;
  }
  Handle();
  if (waiting_) return Next::kWaitForCapacity;
  ReleaseMessage();
  return stopped_ ? Next::kStopReading : Next::kRead;
}

StreamSession::Next StreamSession::RetryWaiting() {
  if (waiting_ && !stopped_) {
    waiting_ = false;
    if (waiting_submit_.job != nullptr) {
      WaitingSubmit submit = std::move(waiting_submit_);
      waiting_submit_ = WaitingSubmit();
      if (!Submit(submit.id, std::move(submit.job),
                  submit.inline_result_max_bytes)) {
        waiting_ = true;
      }
    } else {
      Handle();
    }
    if (waiting_) return Next::kWaitForCapacity;
    ReleaseMessage();
  }
  return stopped_ ? Next::kStopReading : Next::kRead;
}

void StreamSession::Handle() {
  const v1::StreamRequest& req = message_.header;
  const uint64_t id = req.job_id();
  if (message_.has_job) return HandleWholeJob();
  const bool ended = req.end_of_job();
  if (req.has_params()) {
    if (IsOpen(id)) return BreakOnReopen(id, "params");
    // A failed job's id may start a new job before the old one's end.
    Unignore(id);
    if (!StartJob(id, ended)) {
      waiting_ = true;
      return;
    }
    if (receiving_.count(id) == 0) return;  // failed
  } else if (ignored_.count(id) > 0) {
    if (ended) Unignore(id);
    return;
  } else if (receiving_.count(id) == 0) {
    return StopReading(
        absl::InvalidArgumentError(absl::StrCat(
            "message ", messages_, " of the stream: job_id ", id,
            ": no such job is being received (a job's first message carries "
            "params or job, and parts after its end_of_job belong to no "
            "job); no later message was read")),
        absl::StatusCode::kAborted);
  }
  JobAssembly& assembly = receiving_.at(id);
  if (message_.data.size > 0) {
    absl::Status s = assembly.Append(message_);
    if (!s.ok()) return FailJob(id, std::move(s), ended);
    assembly.set_last_progress(absl::Now());
  }
  if (!ended) return;

  absl::Status complete = assembly.CheckComplete();
  const uint64_t inline_max = assembly.inline_result_max_bytes();
  std::shared_ptr<GemmJob> job = assembly.TakeJob();
  receiving_.erase(id);
  if (!complete.ok()) {
    return outbox_.PushRejected(id, std::move(complete), &job->problem());
  }
  if (!Submit(id, std::move(job), inline_max)) waiting_ = true;
}

void StreamSession::HandleWholeJob() {
  const v1::StreamRequest& req = message_.header;
  const uint64_t id = req.job_id();
  if (IsOpen(id)) return BreakOnReopen(id, "job");
  Unignore(id);
  auto fail = [&](absl::Status status) {
    FailJob(id, std::move(status), /*ended=*/true);
  };
  if (req.has_params() || req.operand() != v1::OPERAND_UNSPECIFIED ||
      req.offset() != 0 || message_.data.size > 0) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "job_id ", id,
        ": job: a whole-job message must not also carry params, operand, "
        "offset or data")));
  }
  const v1::GemmRequest& whole = message_.job;
  if (!whole.has_params()) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("job_id ", id, ": job.params: missing")));
  }
  // One copy of each operand into the job's (pinned) storage, no
  // reassembly.
  absl::StatusOr<std::shared_ptr<GemmJob>> job = intake_->AdmitComplete(
      whole.params(), message_.job_a, message_.job_b, message_.job_c,
      absl::StrCat("job_id ", id, ": "), call_.share);
  if (!job.ok()) {
    if (MayWait(job.status(), /*needs_budget=*/true)) {
      waiting_ = true;
      return;
    }
    return fail(job.status());
  }
  open_refusals_in_a_row_ = 0;
  if (!Submit(id, std::move(*job), whole.params().inline_result_max_bytes())) {
    waiting_ = true;
  }
}

void StreamSession::BreakOnReopen(uint64_t id, const char* field) {
  StopReading(
      absl::InvalidArgumentError(absl::StrCat(
          "message ", messages_, " of the stream: job_id ", id, ": ", field,
          " for a job that is open (started, and its JobEnd not yet "
          "sent); no later message was read")),
      absl::StatusCode::kAborted);
}

bool StreamSession::StartJob(uint64_t id, bool ended) {
  const v1::GemmParams& params = message_.header.params();
  if (options_.max_open_jobs > 0 &&
      receiving_.size() >= options_.max_open_jobs) {
    FailJob(id,
            absl::ResourceExhaustedError(
                absl::StrCat("job_id ", id, ": ", receiving_.size(),
                             " jobs of this stream are being received already "
                             "(--max-open-jobs-per-stream ",
                             options_.max_open_jobs, "); end some first")),
            ended);
    if (++open_refusals_in_a_row_ >= options_.max_open_jobs) {
      StopReading(
          absl::ResourceExhaustedError(absl::StrCat(
              "message ", messages_,
              " of the stream: ", open_refusals_in_a_row_,
              " jobs in a row started while --max-open-jobs-per-stream (",
              options_.max_open_jobs,
              ") were being received, none of them ended; no later message "
              "was read")),
          absl::StatusCode::kResourceExhausted);
    }
    return true;
  }
  absl::StatusOr<JobSpec> spec = intake_->Validate(params);
  if (!spec.ok()) {
    FailJob(id, spec.status(), ended);
    return true;
  }
  absl::StatusOr<std::shared_ptr<GemmJob>> job =
      intake_->Allocate(*spec, call_.share);
  if (!job.ok()) {
    if (MayWait(job.status(), /*needs_budget=*/true)) return false;
    FailJob(id, job.status(), ended);
    return true;
  }
  auto [it, inserted] = receiving_.emplace(
      id, JobAssembly(id, std::move(*job), params.inline_result_max_bytes()));
  (void)inserted;
  it->second.set_last_progress(absl::Now());
  open_refusals_in_a_row_ = 0;
  return true;
}

bool StreamSession::Submit(uint64_t id, std::shared_ptr<GemmJob> job,
                           uint64_t inline_result_max_bytes) {
  const bool inline_result =
      outbox_.FitsInline(job->problem(), inline_result_max_bytes);
  running_.emplace(id, job);
  absl::Status s =
      intake_->Submit(job, call_,
                      [done = job_done_, id, inline_result](
                          GemmJob& finished, absl::Status status) {
                        done(id, inline_result, finished, std::move(status));
                      });
  if (s.ok()) return true;
  running_.erase(id);
  if (MayWait(s, /*needs_budget=*/false)) {
    waiting_submit_ = {id, std::move(job), inline_result_max_bytes};
    return false;
  }
  outbox_.PushRejected(id, std::move(s), &job->problem());
  return true;
}

bool StreamSession::MayWait(const absl::Status& status,
                            bool needs_budget) const {
  // UNAVAILABLE is a full budget or queue, or shutdown; only the first two
  // pass. A job that needs budget waits only when no job of this stream is
  // half received: those hold budget that only later messages free.
  return absl::IsUnavailable(status) && intake_->accepting() &&
         !(needs_budget && !receiving_.empty());
}

void StreamSession::FailJob(uint64_t id, absl::Status status, bool ended) {
  receiving_.erase(id);
  if (!ended) Ignore(id);
  outbox_.PushRejected(id, std::move(status));
}

void StreamSession::Ignore(uint64_t id) {
  if (ignored_.count(id) > 0) return;
  while (ignored_.size() >= options_.max_ignored_jobs &&
         !ignored_order_.empty()) {
    ignored_.erase(ignored_order_.front());
    ignored_order_.pop_front();
  }
  ignored_.insert(id);
  ignored_order_.push_back(id);
}

void StreamSession::Unignore(uint64_t id) {
  if (ignored_.erase(id) == 0) return;
  for (auto it = ignored_order_.begin(); it != ignored_order_.end(); ++it) {
    if (*it == id) {
      ignored_order_.erase(it);
      break;
    }
  }
}

bool StreamSession::IsOpen(uint64_t id) const {
  return receiving_.count(id) > 0 || running_.count(id) > 0 ||
         (waiting_submit_.job != nullptr && waiting_submit_.id == id);
}

void StreamSession::StopReading(absl::Status why, absl::StatusCode job_code) {
  if (stopped_) return;
  stopped_ = true;
  final_status_ = why;
  stop_job_code_ = job_code;
  stop_job_reason_ =
      job_code == absl::StatusCode::kUnavailable
          ? std::string(why.message())
          : absl::StrCat("the stream broke before the job was complete (",
                         why.message(), ")");
  auto end_job = [this](uint64_t id) {
    outbox_.PushRejected(
        id, absl::Status(stop_job_code_,
                         absl::StrCat("job_id ", id, ": ", stop_job_reason_)));
  };
  for (auto& [id, assembly] : receiving_) {
    (void)assembly;
    end_job(id);
  }
  receiving_.clear();
  if (waiting_) {
    waiting_ = false;
    if (waiting_submit_.job != nullptr) {
      end_job(waiting_submit_.id);
      waiting_submit_ = WaitingSubmit();
    } else {
      // The waiting message started a job (params, or a whole job).
      end_job(message_.header.job_id());
    }
  }
  ReleaseMessage();
  ignored_.clear();
  ignored_order_.clear();
}

int StreamSession::ExpireStalled(absl::Time now) {
  if (options_.stall_timeout <= absl::ZeroDuration() || cancelled_) return 0;
  if (waiting_) {
    // The stream is not being read (flow control): the time does not count
    // against its jobs.
    for (auto& [id, assembly] : receiving_) {
      (void)id;
      assembly.set_last_progress(now);
    }
    return 0;
  }
  std::vector<uint64_t> stalled;
  for (const auto& [id, assembly] : receiving_) {
    if (now - assembly.last_progress() >= options_.stall_timeout) {
      stalled.push_back(id);
    }
  }
  for (uint64_t id : stalled) {
    FailJob(id,
            absl::DeadlineExceededError(absl::StrCat(
                "job_id ", id, ": no data for ",
                absl::FormatDuration(options_.stall_timeout),
                " while the job was being received; its budget is given "
                "back and its later parts are ignored")),
            /*ended=*/false);
  }
  return static_cast<int>(stalled.size());
}

void StreamSession::OnReadsDone() {
  reads_done_ = true;
  // Jobs the client started but never ended can no longer complete.
  for (auto& [id, assembly] : receiving_) {
    (void)assembly;
    outbox_.PushRejected(
        id, absl::InvalidArgumentError(absl::StrCat(
                "job_id ", id, ": stream closed before the job's end_of_job")));
  }
  receiving_.clear();
  ignored_.clear();
  ignored_order_.clear();
}

void StreamSession::Drain() {
  if (reads_done_ || stopped_) return;
  StopReading(absl::UnavailableError(
                  "the server is shutting down; the job was not run"),
              absl::StatusCode::kUnavailable);
  final_status_ = absl::UnavailableError(
      "the server is shutting down: it read no more of this stream; every "
      "job it read has its JobEnd");
}

void StreamSession::OnCancel() {
  cancelled_ = true;
  stopped_ = true;
  final_status_ = absl::CancelledError("stream cancelled");
  // Jobs read but not yet accepted end here, counted as refused (the
  // caller went away), as StopReading counts them; then their host memory
  // and budget go at once.
  for (size_t i = 0; i < receiving_.size(); ++i) {
    intake_->counts().CountRejected(absl::StatusCode::kCancelled);
  }
  if (waiting_) intake_->counts().CountRejected(absl::StatusCode::kCancelled);
  receiving_.clear();
  waiting_ = false;
  waiting_submit_ = WaitingSubmit();
  ReleaseMessage();
  for (auto& [id, job] : running_) {
    (void)id;
    job->Cancel();
  }
  outbox_.Clear();
}

void StreamSession::OnJobDone(uint64_t id, bool inline_result, GemmJob& job,
                              absl::Status status) {
  auto it = running_.find(id);
  if (it == running_.end() || it->second.get() != &job) return;
  std::shared_ptr<GemmJob> owned = std::move(it->second);
  running_.erase(it);
  if (cancelled_) {
    // Its answer reaches nobody.
    intake_->counts().CountFailed(absl::StatusCode::kCancelled, job);
    return;
  }
  if (status.ok()) {
    outbox_.PushResult(id, std::move(owned), inline_result);
  } else {
    outbox_.PushFailed(id, std::move(status), *owned);
  }
}

bool StreamSession::Settled() const {
  return (reads_done_ || stopped_) && running_.empty() && !waiting_;
}

void StreamSession::ReleaseMessage() {
  message_.data = message_.job_a = message_.job_b = message_.job_c =
      wire::Pieces();
  message_.slices.clear();
}

}  // namespace gemm::server
