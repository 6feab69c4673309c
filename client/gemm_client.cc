#include "client/gemm_client.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "proto/wire_codec.h"

namespace gemm::client {
namespace {

constexpr char kGemmMethod[] = "/gemm.v1.GemmService/Gemm";
constexpr char kGemmStreamMethod[] = "/gemm.v1.GemmService/GemmStream";

uint64_t OperandBytes(const GemmArgs& args, v1::Operand operand) {
  switch (operand) {
    case v1::OPERAND_A:
      return 4ull * args.problem.m * args.problem.k;
    case v1::OPERAND_B:
      return 4ull * args.problem.k * args.problem.n;
    case v1::OPERAND_C:
      return args.problem.beta != 0.0f ? 4ull * args.problem.m * args.problem.n : 0;
    default:
      return 0;
  }
}

const float* OperandData(const GemmArgs& args, v1::Operand operand) {
  switch (operand) {
    case v1::OPERAND_A:
      return args.a;
    case v1::OPERAND_B:
      return args.b;
    default:
      return args.c;
  }
}

void FillParams(const GemmArgs& args, v1::GemmParams* params) {
  params->set_m(args.problem.m);
  params->set_n(args.problem.n);
  params->set_k(args.problem.k);
  params->set_trans_a(args.problem.trans_a);
  params->set_trans_b(args.problem.trans_b);
  params->set_alpha(args.problem.alpha);
  params->set_beta(args.problem.beta);
  params->set_kernel(args.kernel);
  params->set_timeout_ms(args.timeout_ms);
}

uint64_t JobBytes(const GemmArgs& args) {
  return OperandBytes(args, v1::OPERAND_A) + OperandBytes(args, v1::OPERAND_B) +
         OperandBytes(args, v1::OPERAND_C);
}

// The caller's operands, as the encoder takes them.
wire::Operands OperandsOf(const GemmArgs& args) {
  auto view = [&args](v1::Operand op) {
    return absl::string_view(reinterpret_cast<const char*>(OperandData(args, op)),
                             OperandBytes(args, op));
  };
  return {view(v1::OPERAND_A), view(v1::OPERAND_B), view(v1::OPERAND_C)};
}

}  // namespace

absl::Duration BackoffBeforeRetry(const RetryPolicy& policy, int attempt) {
  const double scale =
      std::pow(std::max(policy.backoff_multiplier, 1.0), attempt - 1);
  return std::min(policy.initial_backoff * scale, policy.max_backoff);
}

// Runs tasks after a delay, on one thread of its own. The waits of retries
// live here rather than on gRPC's threads. Thread-safe.
class RetryScheduler {
 public:
  explicit RetryScheduler(RetryPolicy policy)
      : policy_(policy), thread_([this] { Loop(); }) {}
  ~RetryScheduler() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }

  // Runs `task` after the jittered backoff that follows attempt `attempt`.
  void AfterBackoff(int attempt, std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    std::uniform_real_distribution<double> factor(1.0 - policy_.jitter,
                                                  1.0 + policy_.jitter);
    const absl::Duration wait =
        BackoffBeforeRetry(policy_, attempt) * std::max(0.0, factor(random_));
    tasks_.emplace(std::chrono::steady_clock::now() +
                       absl::ToChronoNanoseconds(wait),
                   std::move(task));
    wake_.notify_one();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      if (tasks_.empty()) {
        // Tasks hold their calls' tokens, so none is left at shutdown.
        if (stopping_) return;
        wake_.wait(lock);
        continue;
      }
      auto first = tasks_.begin();
      if (first->first > std::chrono::steady_clock::now()) {
        wake_.wait_until(lock, first->first);
        continue;
      }
      std::function<void()> task = std::move(first->second);
      tasks_.erase(first);
      lock.unlock();
      task();
      task = nullptr;
      lock.lock();
    }
  }

  const RetryPolicy policy_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::multimap<std::chrono::steady_clock::time_point, std::function<void()>>
      tasks_;
  std::mt19937_64 random_{std::random_device{}()};
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

CallTracker::Token::Token(std::shared_ptr<CallTracker> tracker)
    : tracker_(std::move(tracker)) {
  absl::MutexLock lock(&tracker_->mu_);
  ++tracker_->calls_;
}

CallTracker::Token::~Token() {
  absl::MutexLock lock(&tracker_->mu_);
  --tracker_->calls_;
}

void CallTracker::WaitForIdle() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* calls) { return *calls == 0; }, &calls_));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

absl::Status CheckArgs(const GemmArgs& args) {
  if ((args.problem.k > 0 && (args.a == nullptr || args.b == nullptr)) ||
      (args.problem.beta != 0.0f && args.c == nullptr)) {
    return absl::InvalidArgumentError(
        "GemmArgs: a and b must be set (and c when beta is not 0)");
  }
  return absl::OkStatus();
}

// The client side of one GemmStream call. It owns itself from StartCall to
// OnDone. gRPC operations are never started with mu_ held.
class JobStream::Reactor final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public std::enable_shared_from_this<JobStream::Reactor> {
 public:
  // `retries` (may be null when max_attempts is 1) must outlive the call;
  // the token sees to that.
  Reactor(grpc::GenericStub* stub, std::shared_ptr<CallTracker> tracker,
          const GemmClient::Options& options, int max_attempts,
          RetryScheduler* retries)
      : token_(std::move(tracker)),
        chunk_bytes_(options.chunk_bytes),
        whole_job_max_bytes_(options.whole_job_max_bytes),
        inline_result_max_bytes_(options.inline_result_max_bytes),
        coalesce_small_writes_(options.coalesce_small_writes),
        max_attempts_(retries != nullptr ? max_attempts : 1),
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
        refused = final_status_.ok() ? absl::FailedPreconditionError(
                                           "stream already finished")
                                     : final_status_;
      } else if (close_requested_) {
        refused = absl::FailedPreconditionError("stream already finished");
      } else {
        // Queued even when the call is failing: OnDone then reports the
        // call's own status for it.
        Job job;
        job.id = next_id_++;
        job.args = args;
        job.c_out = c_out;
        job.done = std::move(done);
        job.c_bytes = 4ull * args.problem.m * args.problem.n;
        to_send_.push_back(std::move(job));
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
      if (!ok) {
        // The call is over; OnReadDone(false) and OnDone tell why.
        broken_ = true;
      }
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
    std::vector<Job> failed;
    absl::Status final_status = FromGrpcStatus(status);
    std::shared_ptr<Reactor> self;
    {
      absl::MutexLock lock(&mu_);
      if (!malformed_.ok()) final_status = malformed_;
      broken_ = true;
      call_done_ = true;
      for (Job& job : to_send_) failed.push_back(std::move(job));
      to_send_.clear();
      for (auto& [id, job] : in_flight_) failed.push_back(std::move(job));
      in_flight_.clear();
      final_status_ = final_status;
      self = std::move(self_);
    }
    for (Job& job : failed) {
      job.done(final_status.ok()
                   ? absl::InternalError(absl::StrCat(
                         "server closed the stream without ending job ",
                         job.id))
                   : final_status);
    }
    done_.Notify();
  }

 private:
  struct Job {
    uint64_t id = 0;
    GemmArgs args;
    float* c_out = nullptr;
    GemmCallback done;
    uint64_t c_bytes = 0;
    uint64_t c_received = 0;
    int attempt = 1;
    bool params_sent = false;
    int operand = v1::OPERAND_A;  // next operand to send
    uint64_t offset = 0;          // next byte of it
  };


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
        NextMessage(&request_);
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

  // Builds the next message of the job at the front of to_send_: the
  // operand bytes are copied once, straight into the message.
  void NextMessage(grpc::ByteBuffer* request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Job& job = to_send_.front();
    if (!job.params_sent && JobBytes(job.args) <= whole_job_max_bytes_) {
      // The whole job in one message.
      v1::GemmParams params;
      FillParams(job.args, &params);
      params.set_inline_result_max_bytes(inline_result_max_bytes_);
      *request = wire::EncodeWholeJob(job.id, params, OperandsOf(job.args));
      job.params_sent = true;
      const uint64_t id = job.id;
      in_flight_.emplace(id, std::move(job));
      to_send_.pop_front();
      return;
    }
    v1::StreamRequest header;
    header.set_job_id(job.id);
    if (!job.params_sent) {
      FillParams(job.args, header.mutable_params());
      header.mutable_params()->set_inline_result_max_bytes(
          inline_result_max_bytes_);
      job.params_sent = true;
    }
    // Skip operands with nothing (left) to send.
    while (job.operand <= v1::OPERAND_C &&
           job.offset >=
               OperandBytes(job.args, static_cast<v1::Operand>(job.operand))) {
      ++job.operand;
      job.offset = 0;
    }
    absl::string_view data;
    if (job.operand <= v1::OPERAND_C) {
      const auto op = static_cast<v1::Operand>(job.operand);
      const uint64_t total = OperandBytes(job.args, op);
      const uint64_t n = std::min(chunk_bytes_, total - job.offset);
      header.set_operand(op);
      header.set_offset(job.offset);
      data = absl::string_view(
          reinterpret_cast<const char*>(OperandData(job.args, op)) + job.offset,
          n);
      job.offset += n;
      while (job.operand <= v1::OPERAND_C &&
             job.offset >= OperandBytes(job.args,
                                        static_cast<v1::Operand>(job.operand))) {
        ++job.operand;
        job.offset = 0;
      }
    }
    if (job.operand > v1::OPERAND_C) {
      header.set_end_of_job(true);
      const uint64_t id = job.id;
      in_flight_.emplace(id, std::move(job));
      to_send_.pop_front();
    }
    *request = wire::EncodeStreamRequest(header, data);
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
      } else if (!DeliverToJob(response, it, &done, &result)) {
        return;
      }
    }
    if (done) done(std::move(result));
  }

  // Applies a response to a job whose every part is sent. Returns true when
  // the job ended (`done` is then set unless it is to be retried).
  bool DeliverToJob(const wire::DecodedResponse& response,
                    std::unordered_map<uint64_t, Job>::iterator it,
                    GemmCallback* done, absl::StatusOr<v1::Timing>* result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Job& job = it->second;
    if (response.has_chunk) {
      if (response.chunk_offset > job.c_bytes ||
          response.data.size > job.c_bytes - response.chunk_offset) {
        job.c_received = UINT64_MAX;  // reported at the end record
        return false;
      }
      // The one copy of a result byte on the client: from the received
      // slices into the caller's c_out.
      response.data.CopyTo(reinterpret_cast<char*>(job.c_out) +
                           response.chunk_offset);
      job.c_received += response.data.size;
      return false;
    }
    if (!response.has_end) return false;
    const v1::JobEnd& end = response.end;
    if (end.code() == static_cast<int>(absl::StatusCode::kUnavailable) &&
        job.attempt < max_attempts_) {
      ScheduleRetry(std::move(job));
      in_flight_.erase(it);
      return true;
    }
    if (end.code() == 0 && response.data.size > 0 && job.c_received == 0) {
      // The result came inside the end record (inline_result_max_bytes).
      if (response.data.size == job.c_bytes) {
        response.data.CopyTo(reinterpret_cast<char*>(job.c_out));
        job.c_received = job.c_bytes;
      } else {
        job.c_received = response.data.size;
      }
    }
    if (end.code() != 0) {
      *result = absl::Status(static_cast<absl::StatusCode>(end.code()),
                             end.message());
    } else if (job.c_received != job.c_bytes) {
      *result = absl::InternalError(absl::StrFormat(
          "job %d: server sent %d bytes of C, expected %d", job.id,
          job.c_received, job.c_bytes));
    } else {
      *result = end.timing();
    }
    *done = std::move(job.done);
    in_flight_.erase(it);
    return true;
  }

  // A job can end before all of it is sent: the server may refuse it as
  // soon as it reads the params. Then the rest of it is never sent, and the
  // job ends (or is retried) now. Returns false for an id not on the stream.
  bool EndWhileSending(const wire::DecodedResponse& response, GemmCallback* done,
                       absl::StatusOr<v1::Timing>* result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = std::find_if(to_send_.begin(), to_send_.end(),
                           [&response](const Job& job) {
                             return job.id == response.job_id;
                           });
    if (it == to_send_.end()) return false;
    Job job = std::move(*it);
    to_send_.erase(it);
    const v1::JobEnd& end = response.end;
    if (end.code() == static_cast<int>(absl::StatusCode::kUnavailable) &&
        job.attempt < max_attempts_) {
      ScheduleRetry(std::move(job));
      return true;
    }
    *result = end.code() != 0
                  ? absl::Status(static_cast<absl::StatusCode>(end.code()),
                                 end.message())
                  : absl::InternalError(absl::StrCat(
                        "server ended job ", job.id, " before it was sent"));
    *done = std::move(job.done);
    return true;
  }

  // Sends the job again, with a fresh id, after the backoff.
  void ScheduleRetry(Job job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int attempt = job.attempt;
    job.attempt = attempt + 1;
    job.c_received = 0;
    job.params_sent = false;
    job.operand = v1::OPERAND_A;
    job.offset = 0;
    ++pending_retries_;
    auto shared_job = std::make_shared<Job>(std::move(job));
    retries_->AfterBackoff(
        attempt, [self = shared_from_this(), shared_job]() mutable {
          self->Resend(std::move(*shared_job));
        });
  }

  void Resend(Job job) {
    absl::Status failed;
    {
      absl::MutexLock lock(&mu_);
      if (call_done_) {
        failed = final_status_.ok()
                     ? absl::UnavailableError("stream ended before a retry")
                     : final_status_;
      } else {
        job.id = next_id_++;
        to_send_.push_back(std::move(job));
      }
    }
    if (!failed.ok()) job.done(failed);
    {
      absl::MutexLock lock(&mu_);
      --pending_retries_;
    }
    Pump();
  }

  // First member, so destroyed last: after the context.
  CallTracker::Token token_;
  const uint64_t chunk_bytes_;
  const uint64_t whole_job_max_bytes_;
  const uint64_t inline_result_max_bytes_;
  const bool coalesce_small_writes_;
  const int max_attempts_;
  RetryScheduler* const retries_;
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;   // owned by the write in flight (a copy)
  grpc::WriteOptions write_options_;  // of the write in flight
  grpc::ByteBuffer response_;  // owned by the read in flight
  wire::DecodedResponse decoded_;  // of response_, used by the read reaction
  absl::Notification done_;

  absl::Mutex mu_;
  std::shared_ptr<Reactor> self_ ABSL_GUARDED_BY(mu_);
  std::deque<Job> to_send_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, Job> in_flight_ ABSL_GUARDED_BY(mu_);
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

JobStream::JobStream(std::shared_ptr<Reactor> reactor, std::string target)
    : reactor_(std::move(reactor)), target_(std::move(target)) {}

bool JobStream::done() const { return reactor_->done(); }

JobStream::~JobStream() { Finish().IgnoreError(); }

void JobStream::Submit(const GemmArgs& args, float* c_out, GemmCallback done) {
  reactor_->Submit(args, c_out, std::move(done));
}

absl::Status JobStream::Finish() {
  if (!finished_.exchange(true)) {
    reactor_->Close();
  }
  return reactor_->Wait();
}

GemmClient::GemmClient(const Options& options) : options_(options) {
  std::vector<std::string> targets = options.targets;
  if (targets.empty()) targets.push_back(options.target);
  for (int connection = 0; connection < options.connections_per_target;
       ++connection) {
    for (const std::string& target : targets) {
      grpc::ChannelArguments arguments;
      arguments.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
      arguments.SetMaxSendMessageSize(-1);
      // Channels with equal arguments share one connection; a channel of its
      // own subchannel pool gets a TCP connection of its own.
      arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      // Large results: a deep per-stream window and large frames (see
      // Options).
      if (options.http2_stream_window_bytes > 0) {
        arguments.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                         options.http2_stream_window_bytes);
      }
      if (options.http2_max_frame_bytes > 0) {
        arguments.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE,
                         options.http2_max_frame_bytes);
      }
      Channel channel;
      channel.target = target;
      channel.channel = grpc::CreateCustomChannel(
          target, grpc::InsecureChannelCredentials(), arguments);
      channel.stub = v1::GemmService::NewStub(channel.channel);
      channel.raw = std::make_unique<grpc::GenericStub>(channel.channel);
      channels_.push_back(std::move(channel));
    }
  }
  if (options.retry.max_attempts > 1) {
    retries_ = std::make_shared<RetryScheduler>(options.retry);
  }
}

GemmClient::~GemmClient() {
  tracker_->WaitForIdle();
  retries_.reset();
}

absl::StatusOr<std::unique_ptr<GemmClient>> GemmClient::Create(
    const Options& options) {
  if (options.targets.empty() && options.target.empty()) {
    return absl::InvalidArgumentError("target: empty server address");
  }
  for (const std::string& target : options.targets) {
    if (target.empty()) {
      return absl::InvalidArgumentError("targets: empty server address");
    }
  }
  if (options.connections_per_target < 1) {
    return absl::InvalidArgumentError(
        "connections_per_target: must be at least 1");
  }
  if (options.chunk_bytes < 4 || options.chunk_bytes % 4 != 0) {
    return absl::InvalidArgumentError(
        "chunk_bytes: must be a positive multiple of 4");
  }
  const RetryPolicy& retry = options.retry;
  if (retry.max_attempts < 1 || retry.initial_backoff < absl::ZeroDuration() ||
      retry.max_backoff < retry.initial_backoff ||
      retry.backoff_multiplier < 1.0 || retry.jitter < 0 ||
      retry.jitter > 1) {
    return absl::InvalidArgumentError(
        "retry: need max_attempts >= 1, 0 <= initial_backoff <= max_backoff, "
        "backoff_multiplier >= 1 and jitter in [0, 1]");
  }
  return std::unique_ptr<GemmClient>(new GemmClient(options));
}

std::vector<std::string> GemmClient::channel_targets() const {
  std::vector<std::string> targets;
  for (const Channel& channel : channels_) targets.push_back(channel.target);
  return targets;
}

GemmClient::Channel& GemmClient::NextChannel() {
  return channels_[next_channel_.fetch_add(1, std::memory_order_relaxed) %
                   channels_.size()];
}

void GemmClient::ApplyDeadline(grpc::ClientContext* context) const {
  if (options_.timeout > absl::ZeroDuration()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  }
}

absl::StatusOr<v1::InfoResponse> GemmClient::Info() {
  grpc::ClientContext context;
  ApplyDeadline(&context);
  v1::InfoResponse response;
  grpc::Status status =
      NextChannel().stub->Info(&context, v1::InfoRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::Timing> GemmClient::Gemm(const GemmArgs& args,
                                            float* c_out) {
  return GemmFuture(args, c_out).get();
}

std::future<absl::StatusOr<v1::Timing>> GemmClient::GemmFuture(
    const GemmArgs& args, float* c_out) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<v1::Timing>>>();
  std::future<absl::StatusOr<v1::Timing>> result = promise->get_future();
  GemmAsync(args, c_out, [promise](absl::StatusOr<v1::Timing> timing) {
    promise->set_value(std::move(timing));
  });
  return result;
}

void GemmClient::GemmAsync(const GemmArgs& args, float* c_out,
                           GemmCallback done) {
  absl::Status s = CheckArgs(args);
  if (!s.ok()) {
    done(s);
    return;
  }
  if (WouldSplit(args)) {
    SplitAsync(args, c_out, std::move(done));
    return;
  }
  StartAttempt(args, c_out, std::move(done), 1,
               next_channel_.fetch_add(1, std::memory_order_relaxed));
}

void GemmClient::StartAttempt(const GemmArgs& args, float* c_out,
                              GemmCallback done, int attempt,
                              uint64_t channel_index) {
  if (retries_ != nullptr && attempt < options_.retry.max_attempts) {
    // Wraps `done`: an UNAVAILABLE attempt starts the next one after the
    // backoff. The token keeps the client (and `this`) alive meanwhile.
    auto token = std::make_shared<CallTracker::Token>(tracker_);
    done = [this, args, c_out, attempt, channel_index, token,
            done = std::move(done)](
               absl::StatusOr<v1::Timing> result) mutable {
      if (result.ok() ||
          result.status().code() != absl::StatusCode::kUnavailable) {
        done(std::move(result));
        return;
      }
      retries_->AfterBackoff(
          attempt, [this, args, c_out, attempt, channel_index, token,
                    done = std::move(done)]() mutable {
            // The next channel: a retry tries every server in turn.
            StartAttempt(args, c_out, std::move(done), attempt + 1,
                         channel_index + 1);
          });
    };
  }
  Channel& channel = channels_[channel_index % channels_.size()];
  if (JobBytes(args) > options_.max_unary_bytes) {
    // A stream of one job: it frees itself once the job has ended. Retries
    // happen here, not inside the stream.
    auto reactor = std::make_shared<JobStream::Reactor>(
        channel.raw.get(), tracker_, options_, 1, nullptr);
    reactor->Start(reactor);
    reactor->Submit(args, c_out, std::move(done));
    reactor->Close();
    return;
  }
  // Owned by the callback, which deletes it: the context must stay alive
  // until then, and be gone before gRPC releases the call.
  struct Call {
    explicit Call(std::shared_ptr<CallTracker> tracker)
        : token(std::move(tracker)) {}
    CallTracker::Token token;  // destroyed last
    grpc::ClientContext context;
    grpc::ByteBuffer request;  // refers to the caller's operands
    grpc::ByteBuffer response;
  };
  Call* call = new Call(tracker_);
  ApplyDeadline(&call->context);
  v1::GemmParams params;
  FillParams(args, &params);
  call->request = wire::EncodeGemmRequest(params, OperandsOf(args));
  const uint64_t c_bytes = 4ull * args.problem.m * args.problem.n;
  channel.raw->UnaryCall(
      &call->context, kGemmMethod, grpc::StubOptions(), &call->request,
      &call->response,
      [call, c_out, c_bytes, done = std::move(done)](grpc::Status status) {
        absl::StatusOr<v1::Timing> result;
        wire::DecodedGemmResponse response;
        absl::Status decoded;
        if (status.ok()) {
          decoded = wire::DecodeGemmResponse(call->response, &response);
        }
        if (!status.ok()) {
          result = FromGrpcStatus(status);
        } else if (!decoded.ok()) {
          result = absl::InternalError(
              absl::StrCat("from the server: ", decoded.message()));
        } else if (response.c.size != c_bytes) {
          result = absl::InternalError(
              absl::StrFormat("server sent %d bytes of C, expected %d",
                              response.c.size, c_bytes));
        } else {
          response.c.CopyTo(reinterpret_cast<char*>(c_out));
          result = std::move(*response.header.mutable_timing());
        }
        // The user's callback runs before the call's token goes, so that
        // ~GemmClient waits for it too.
        done(std::move(result));
        delete call;
      });
}

bool GemmClient::WouldSplit(const GemmArgs& args) const {
  return options_.split_rows > 1 && !args.problem.trans_a &&
         args.problem.m >= static_cast<uint32_t>(options_.split_rows) &&
         JobBytes(args) >= options_.split_min_bytes;
}

void GemmClient::SplitAsync(const GemmArgs& args, float* c_out,
                            GemmCallback done) {
  // What the parts have in common; the last one to end calls `done`.
  struct Split {
    absl::Mutex mu;
    int remaining ABSL_GUARDED_BY(mu) = 0;
    absl::Status error ABSL_GUARDED_BY(mu);
    v1::Timing timing ABSL_GUARDED_BY(mu);
    GemmCallback done;
    uint64_t flops = 0;
  };
  const int parts = options_.split_rows;
  auto split = std::make_shared<Split>();
  split->done = std::move(done);
  split->flops = 2ull * args.problem.m * args.problem.n * args.problem.k;
  {
    absl::MutexLock lock(&split->mu);
    split->remaining = parts;
  }
  // Consecutive channels: with at least `parts` of them, one part each.
  const uint64_t first_channel =
      next_channel_.fetch_add(parts, std::memory_order_relaxed);
  for (int i = 0; i < parts; ++i) {
    const uint64_t row = uint64_t{args.problem.m} * i / parts;
    const uint64_t rows = uint64_t{args.problem.m} * (i + 1) / parts - row;
    GemmArgs part = args;
    part.problem.m = static_cast<uint32_t>(rows);
    part.a = args.a + row * args.problem.k;  // rows of A (not transposed)
    if (args.c != nullptr) part.c = args.c + row * args.problem.n;
    StartAttempt(
        part, c_out + row * args.problem.n,
        [split](absl::StatusOr<v1::Timing> result) {
          GemmCallback done;
          absl::StatusOr<v1::Timing> merged;
          {
            absl::MutexLock lock(&split->mu);
            v1::Timing& t = split->timing;
            if (!result.ok()) {
              if (split->error.ok()) split->error = result.status();
            } else {
              // Device work adds up; waiting and server time overlap, so
              // the longest part's count.
              t.set_queue_ms(std::max(t.queue_ms(), result->queue_ms()));
              t.set_server_ms(std::max(t.server_ms(), result->server_ms()));
              t.set_h2d_ms(t.h2d_ms() + result->h2d_ms());
              t.set_compute_ms(t.compute_ms() + result->compute_ms());
              t.set_d2h_ms(t.d2h_ms() + result->d2h_ms());
              t.set_batch_size(std::max(t.batch_size(), result->batch_size()));
              if (t.kernel().empty()) t.set_kernel(result->kernel());
              if (t.device().empty()) t.set_device(result->device());
            }
            if (--split->remaining > 0) return;
            if (!split->error.ok()) {
              merged = split->error;
            } else {
              if (t.compute_ms() > 0) {
                t.set_gflops(split->flops / (t.compute_ms() * 1e6));
              }
              merged = t;
            }
            done = std::move(split->done);
          }
          done(std::move(merged));
        },
        1, first_channel + i);
  }
}

std::unique_ptr<JobStream> GemmClient::OpenStream() {
  Channel& channel = NextChannel();
  auto reactor = std::make_shared<JobStream::Reactor>(
      channel.raw.get(), tracker_, options_, options_.retry.max_attempts,
      retries_.get());
  reactor->Start(reactor);
  return std::make_unique<JobStream>(std::move(reactor), channel.target);
}

}  // namespace gemm::client
