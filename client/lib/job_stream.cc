#include "client/lib/job_stream.h"

#include <algorithm>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/lib/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "proto/wire_codec.h"

namespace gemm::client {
namespace {

constexpr char kGemmStreamMethod[] = "/gemm.v1.GemmService/GemmStream";

bool IsUnavailable(const v1::JobEnd& end) {
  return end.code() == static_cast<int>(absl::StatusCode::kUnavailable);
}

}  // namespace

// The client side of one GemmStream call. It owns itself from Start() to
// OnDone. gRPC operations are never started with mu_ held.
class JobStream::Reactor final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public std::enable_shared_from_this<JobStream::Reactor> {
 public:
  // `retries` (may be null) must outlive the call; the token sees to that.
  Reactor(grpc::GenericStub* stub, std::shared_ptr<CallTracker> tracker,
          const JobStream::Options& options, RetryScheduler* retries)
      : token_(std::move(tracker)),
        limits_(options.limits),
        coalesce_small_writes_(options.coalesce_small_writes),
        max_attempts_(retries != nullptr ? options.max_attempts : 1),
        retries_(retries) {
    if (options.timeout > absl::ZeroDuration()) {
      context_.set_deadline(absl::ToChronoTime(absl::Now() + options.timeout));
    }
    stub->PrepareBidiStreamingCall(&context_, kGemmStreamMethod,
                                   grpc::StubOptions(), this);
  }

  // Starts the call; the reactor owns itself (through `self`) until OnDone.
  // The call starts only once that ownership is in place: with a deadline
  // already passed, OnDone can come before StartCall() returns.
  void Start(std::shared_ptr<Reactor> self) {
    {
      absl::MutexLock lock(&mu_);
      self_ = std::move(self);
    }
    // Held until writes are done, so that Submit() can start writes from
    // outside reactions without racing OnDone.
    AddHold();
    StartRead(&response_);
    StartCall();
  }

  void Submit(const GemmArgs& args, float* c_out, GemmCallback done) {
    absl::Status refused = CheckArgs(args);
    if (refused.ok()) {
      absl::MutexLock lock(&mu_);
      if (call_done_) {
        refused = final_status_.ok()
                      ? absl::FailedPreconditionError("stream already finished")
                      : final_status_;
      } else if (close_requested_) {
        refused = absl::FailedPreconditionError("stream already finished");
      } else {
        // Queued even when the call is failing: OnDone then reports the
        // call's own status for it.
        to_send_.emplace_back(next_id_++, args, c_out, std::move(done));
      }
    }
    if (!refused.ok()) {
      done(refused);
      return;
    }
    Pump();
  }

  void Close() {
    {
      absl::MutexLock lock(&mu_);
      close_requested_ = true;
    }
    Pump();
  }

  absl::Status Wait() {
    done_.WaitForNotification();
    absl::MutexLock lock(&mu_);
    // Jobs waiting for a retry when the call broke fail once their wait is
    // over.
    mu_.Await(absl::Condition(
        +[](int* pending) { return *pending == 0; }, &pending_retries_));
    return final_status_;
  }

  bool done() {
    absl::MutexLock lock(&mu_);
    return call_done_;
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      // Not ok: the call is over; OnReadDone(false) and OnDone tell why.
      if (!ok) broken_ = true;
    }
    Pump();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      {
        absl::MutexLock lock(&mu_);
        broken_ = true;
      }
      // Not ReleaseHold() directly: another thread may be between deciding
      // on a write (or WritesDone) and starting it; Pump() releases the hold
      // only when nothing is in flight, and the write's own completion (or
      // the WritesDone path) releases it otherwise.
      Pump();
      return;
    }
    absl::Status decoded = wire::DecodeStreamResponse(response_, &decoded_);
    if (!decoded.ok()) {
      {
        absl::MutexLock lock(&mu_);
        broken_ = true;
        malformed_ = absl::InternalError(
            absl::StrCat("from the server: ", decoded.message()));
      }
      context_.TryCancel();  // OnDone fails every job with malformed_
      Pump();
      return;
    }
    Deliver(decoded_);
    StartRead(&response_);
    Pump();  // the end of the last job may let the stream half-close
  }

  void OnDone(const grpc::Status& status) override {
    std::vector<StreamJob> failed;
    absl::Status final_status = FromGrpcStatus(status);
    std::shared_ptr<Reactor> self;
    {
      absl::MutexLock lock(&mu_);
      if (!malformed_.ok()) final_status = malformed_;
      broken_ = true;
      call_done_ = true;
      for (StreamJob& job : to_send_) failed.push_back(std::move(job));
      to_send_.clear();
      for (auto& [id, job] : in_flight_) failed.push_back(std::move(job));
      in_flight_.clear();
      final_status_ = final_status;
      self = std::move(self_);
    }
    for (StreamJob& job : failed) {
      job.TakeCallback()(
          final_status.ok()
              ? absl::InternalError(absl::StrCat(
                    "server closed the stream without ending job ", job.id()))
              : final_status);
    }
    done_.Notify();
  }

 private:
  // Lets the call end once nothing more will be written.
  void ReleaseHold() {
    {
      absl::MutexLock lock(&mu_);
      if (hold_released_) return;
      hold_released_ = true;
    }
    RemoveHold();
  }

  // Starts the next write, or half-closes once asked to and all is sent.
  void Pump() {
    enum class Action { kNone, kWrite, kWritesDone, kRelease } action;
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || writes_done_sent_) {
        action = Action::kNone;
      } else if (broken_) {
        action = Action::kRelease;
      } else if (!to_send_.empty()) {
        // The operand bytes are copied once, straight into the message.
        if (to_send_.front().NextMessage(limits_, &request_)) {
          StreamJob& job = to_send_.front();
          const uint64_t id = job.id();
          in_flight_.emplace(id, std::move(job));
          to_send_.pop_front();
        }
        writing_ = true;
        action = Action::kWrite;
        // Set while no write is in flight; used by this write only.
        write_options_ = grpc::WriteOptions();
        if (coalesce_small_writes_ && !to_send_.empty() &&
            request_.Length() <= wire::kCoalesceMaxBytes) {
          // The next message follows at once (OnWriteDone -> Pump), and the
          // last one of a run goes without the hint.
          write_options_.set_buffer_hint();
        }
      } else if (close_requested_ && pending_retries_ == 0 &&
                 (max_attempts_ == 1 || in_flight_.empty())) {
        // With retries on, a job still in flight may have to be sent again,
        // so the stream half-closes only once every job has ended.
        writes_done_sent_ = true;
        action = Action::kWritesDone;
      } else {
        action = Action::kNone;
      }
    }
    switch (action) {
      case Action::kWrite:
        StartWrite(&request_, write_options_);
        break;
      case Action::kWritesDone:
        StartWritesDone();
        ReleaseHold();
        break;
      case Action::kRelease:
        ReleaseHold();
        break;
      case Action::kNone:
        break;
    }
  }

  void Deliver(const wire::DecodedResponse& response) {
    GemmCallback done;
    absl::StatusOr<v1::Timing> result;
    {
      absl::MutexLock lock(&mu_);
      auto it = in_flight_.find(response.job_id);
      if (it == in_flight_.end()) {
        if (!response.has_end || !EndWhileSending(response, &done, &result)) {
          return;  // not ours; ignore
        }
      } else if (response.has_chunk) {
        it->second.AcceptChunk(response.chunk_offset, response.data);
        return;
      } else if (!response.has_end) {
        return;
      } else if (IsUnavailable(response.end) &&
                 it->second.attempt() < max_attempts_) {
        ScheduleRetry(std::move(it->second));
        in_flight_.erase(it);
        return;
      } else {
        result = it->second.End(response.end, response.data);
        done = it->second.TakeCallback();
        in_flight_.erase(it);
      }
    }
    if (done) done(std::move(result));
  }

  // A job can end before all of it is sent: the server may refuse it as
  // soon as it reads the params. Then the rest of it is never sent, and the
  // job ends (or is retried) now. Returns false for an id not on the
  // stream, and true with `done` unset for a job to be retried.
  bool EndWhileSending(const wire::DecodedResponse& response,
                       GemmCallback* done, absl::StatusOr<v1::Timing>* result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = std::find_if(to_send_.begin(), to_send_.end(),
                           [&response](const StreamJob& job) {
                             return job.id() == response.job_id;
                           });
    if (it == to_send_.end()) return false;
    StreamJob job = std::move(*it);
    to_send_.erase(it);
    const v1::JobEnd& end = response.end;
    if (IsUnavailable(end) && job.attempt() < max_attempts_) {
      ScheduleRetry(std::move(job));
      return true;
    }
    *result = end.code() != 0
                  ? absl::Status(static_cast<absl::StatusCode>(end.code()),
                                 end.message())
                  : absl::InternalError(absl::StrCat(
                        "server ended job ", job.id(), " before it was sent"));
    *done = job.TakeCallback();
    return true;
  }

  // Sends the job again, under a new id, after the backoff.
  void ScheduleRetry(StreamJob job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int attempt = job.attempt();
    ++pending_retries_;
    auto shared_job = std::make_shared<StreamJob>(std::move(job));
    retries_->AfterBackoff(attempt,
                           [self = shared_from_this(), shared_job]() mutable {
                             self->Resend(std::move(*shared_job));
                           });
  }

  void Resend(StreamJob job) {
    absl::Status failed;
    {
      absl::MutexLock lock(&mu_);
      if (call_done_) {
        failed = final_status_.ok()
                     ? absl::UnavailableError("stream ended before a retry")
                     : final_status_;
      } else {
        job.Restart(next_id_++);
        to_send_.push_back(std::move(job));
      }
    }
    if (!failed.ok()) job.TakeCallback()(failed);
    {
      absl::MutexLock lock(&mu_);
      --pending_retries_;
    }
    Pump();
  }

  // First member, so destroyed last: after the context.
  CallTracker::Token token_;
  const StreamMessageLimits limits_;
  const bool coalesce_small_writes_;
  const int max_attempts_;
  RetryScheduler* const retries_;
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;          // owned by the write in flight
  grpc::WriteOptions write_options_;  // of the write in flight
  grpc::ByteBuffer response_;         // owned by the read in flight
  wire::DecodedResponse decoded_;     // of response_, for the read reaction
  absl::Notification done_;

  absl::Mutex mu_;
  std::shared_ptr<Reactor> self_ ABSL_GUARDED_BY(mu_);
  std::deque<StreamJob> to_send_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, StreamJob> in_flight_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  // Set when a response could not be decoded; the call's final status.
  absl::Status malformed_ ABSL_GUARDED_BY(mu_);
  bool close_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool call_done_ ABSL_GUARDED_BY(mu_) = false;
  int pending_retries_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<JobStream> JobStream::Open(grpc::GenericStub* stub,
                                           std::string target,
                                           const Options& options,
                                           std::shared_ptr<CallTracker> tracker,
                                           RetryScheduler* retries) {
  auto reactor =
      std::make_shared<Reactor>(stub, std::move(tracker), options, retries);
  reactor->Start(reactor);
  return std::unique_ptr<JobStream>(
      new JobStream(std::move(reactor), std::move(target)));
}

void JobStream::RunOne(grpc::GenericStub* stub, const Options& options,
                       std::shared_ptr<CallTracker> tracker,
                       const GemmArgs& args, float* c_out, GemmCallback done) {
  // It frees itself once the job has ended.
  auto reactor =
      std::make_shared<Reactor>(stub, std::move(tracker), options, nullptr);
  reactor->Start(reactor);
  reactor->Submit(args, c_out, std::move(done));
  reactor->Close();
}

JobStream::JobStream(std::shared_ptr<Reactor> reactor, std::string target)
    : reactor_(std::move(reactor)), target_(std::move(target)) {}

JobStream::~JobStream() { Finish().IgnoreError(); }

bool JobStream::done() const { return reactor_->done(); }

void JobStream::Submit(const GemmArgs& args, float* c_out, GemmCallback done) {
  reactor_->Submit(args, c_out, std::move(done));
}

absl::Status JobStream::Finish() {
  if (!finished_.exchange(true)) reactor_->Close();
  return reactor_->Wait();
}

}  // namespace gemm::client
