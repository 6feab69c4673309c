#include "server/rpc/gemm_stream_reactor.h"

#include <string>
#include <utility>

#include "proto/wire_codec.h"

namespace gemm::server {
namespace {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

}  // namespace

void StreamRegistry::DrainAll() {
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
  }
  ForEach([](StreamSession& session) { session.Drain(); });
}

void StreamRegistry::ExpireStalled(absl::Time now) {
  ForEach([now](StreamSession& session) { session.ExpireStalled(now); });
}

void StreamRegistry::ForEach(absl::FunctionRef<void(StreamSession&)> fn) {
  std::vector<GemmStreamReactor*> held;
  {
    absl::MutexLock lock(&mu_);
    // Each stream takes a hold, so it stays alive once the lock is gone.
    for (GemmStreamReactor* stream : streams_) {
      stream->HoldAndApply(fn);
      held.push_back(stream);
    }
  }
  for (GemmStreamReactor* stream : held) stream->ReleaseHold();
}

size_t StreamRegistry::open_streams() const {
  absl::MutexLock lock(&mu_);
  return streams_.size();
}

bool StreamRegistry::Add(GemmStreamReactor* stream) {
  absl::MutexLock lock(&mu_);
  if (draining_) return false;
  streams_.insert(stream);
  return true;
}

void StreamRegistry::Remove(GemmStreamReactor* stream) {
  absl::MutexLock lock(&mu_);
  streams_.erase(stream);
}

GemmStreamReactor::GemmStreamReactor(JobIntake* intake,
                                     StreamRegistry* registry,
                                     const Options& options,
                                     grpc::CallbackServerContext* context,
                                     const std::string& client)
    : intake_(intake),
      registry_(registry),
      options_(options),
      context_(context),
      peer_(options.on_early_cancel ? context->peer() : std::string()),
      session_(intake,
               {.result_chunk_bytes = options.result_chunk_bytes,
                .stall_timeout = options.job_stall_timeout,
                .max_open_jobs = options.max_open_jobs},
               intake->CallOf(context, client),
               [this](uint64_t id, bool inline_result, GemmJob& job,
                      absl::Status status) {
                 OnJobDone(id, inline_result, job, std::move(status));
               }) {
  if (registry_->Add(this)) {
    StartRead(&request_);
    return;
  }
  // Opened while the server drains: ends at once, nothing read.
  {
    absl::MutexLock lock(&mu_);
    session_.Drain();
    finished_ = true;
  }
  Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "the server is shutting down"));
}

void GemmStreamReactor::OnReadDone(bool ok) {
  bool start_read = false;
  {
    absl::MutexLock lock(&mu_);
    if (!ok) {
      session_.OnReadsDone();
    } else if (!finished_) {
      read_any_ = true;
      intake_->counts().CountReceived(request_.Length());
      const uint64_t epoch = intake_->capacity_epoch();
      const StreamSession::Next next = session_.OnMessage(request_);
      start_read = AfterMessageLocked(next, epoch);
    }
    request_.Clear();
  }
  if (start_read) return StartReadAndRelease();
  Pump();
}

bool GemmStreamReactor::AfterMessageLocked(StreamSession::Next next,
                                           uint64_t epoch) {
  switch (next) {
    case StreamSession::Next::kRead:
      if (finished_ || cancelled_) return false;
      ++holds_;
      return true;
    case StreamSession::Next::kWaitForCapacity:
      wait_ticket_ = intake_->WaitForCapacity(epoch, [this] { OnCapacity(); });
      return false;
    case StreamSession::Next::kStopReading:
      return false;
  }
  return false;
}

void GemmStreamReactor::OnCapacity() {
  bool start_read = false;
  Next next = Next::kNone;
  grpc::Status final_status;
  {
    absl::MutexLock lock(&mu_);
    wait_ticket_ = 0;
    const uint64_t epoch = intake_->capacity_epoch();
    start_read = AfterMessageLocked(session_.RetryWaiting(), epoch);
    // Not a reaction: once mu_ is released without a hold, the call may
    // finish, so what to do next is decided here.
    if (!start_read) next = DecideLocked(&final_status);
  }
  if (start_read) return StartReadAndRelease();
  Act(next, final_status);
}

void GemmStreamReactor::StartReadAndRelease() {
  StartRead(&request_);
  ReleaseHold();
}

void GemmStreamReactor::ReleaseHold() {
  Next next;
  grpc::Status final_status;
  {
    absl::MutexLock lock(&mu_);
    --holds_;
    // Decided in the same critical section: once the hold is gone, the call
    // may finish and the reactor go.
    next = DecideLocked(&final_status);
  }
  Act(next, final_status);
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
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    session_.OnCancel();
    if (wait_ticket_ != 0 && intake_->CancelWait(wait_ticket_)) {
      wait_ticket_ = 0;
    }
  }
  // Nothing else may come to finish the call (no read in flight while it
  // waited for room).
  Pump();
}

void GemmStreamReactor::OnDone() {
  // IsCancelled() is settled here.
  if (!read_any_ && options_.on_early_cancel && context_->IsCancelled()) {
    options_.on_early_cancel(peer_, began_, context_->deadline());
  }
  registry_->Remove(this);
  // A drain may still hold the reactor, and a thread that decided kNone may
  // still be leaving mu_.
  mu_.LockWhen(absl::Condition(this, &GemmStreamReactor::NoHolds));
  mu_.Unlock();
  delete this;
}

void GemmStreamReactor::HoldAndApply(
    absl::FunctionRef<void(StreamSession&)> fn) {
  absl::MutexLock lock(&mu_);
  ++holds_;
  fn(session_);
  // A session that stopped waiting for room (drained) needs no wake.
  if (wait_ticket_ != 0 && !session_.waiting() &&
      intake_->CancelWait(wait_ticket_)) {
    wait_ticket_ = 0;
  }
}

// The reactor stays alive meanwhile: Finish() waits for the session's
// running jobs.
void GemmStreamReactor::OnJobDone(uint64_t id, bool inline_result, GemmJob& job,
                                  absl::Status status) {
  Next next;
  grpc::Status final_status;
  {
    absl::MutexLock lock(&mu_);
    session_.OnJobDone(id, inline_result, job, std::move(status));
    // Decided in the same critical section that ended the job: once it is
    // unlocked, a gRPC thread may finish the call and delete this reactor,
    // so after kNone this thread must not touch it again.
    next = DecideLocked(&final_status);
  }
  Act(next, final_status);
}

GemmStreamReactor::Next GemmStreamReactor::DecideLocked(
    grpc::Status* final_status) {
  if (finished_ || writing_) return Next::kNone;
  StreamOutbox& outbox = session_.outbox();
  if (write_failed_ || cancelled_) outbox.Clear();
  if (!outbox.empty()) {
    response_ = outbox.Next();
    intake_->counts().CountSent(response_.Length());
    writing_ = true;  // holds off Finish() until OnWriteDone
    // Set while no write is in flight; read by Act() for this write only.
    write_options_ = grpc::WriteOptions();
    if (options_.coalesce_small_writes && !outbox.empty() &&
        response_.Length() <= wire::kCoalesceMaxBytes) {
      // The next message follows at once (OnWriteDone), and the last of a
      // run goes without the hint, so nothing waits for long.
      write_options_.set_buffer_hint();
    }
    return Next::kWrite;
  }
  if (holds_ == 0 && wait_ticket_ == 0 && session_.Settled()) {
    finished_ = true;
    *final_status =
        cancelled_ || write_failed_
            ? grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled")
            : ToGrpc(session_.final_status());
    return Next::kFinish;
  }
  return Next::kNone;
}

void GemmStreamReactor::Act(Next next, const grpc::Status& final_status) {
  if (next == Next::kWrite) StartWrite(&response_, write_options_);
  if (next == Next::kFinish) Finish(final_status);
}

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
