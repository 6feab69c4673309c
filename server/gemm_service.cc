#include "server/gemm_service.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/wire_codec.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

using wire::DecodedGemmRequest;
using wire::DecodedRequest;
using wire::DecodeGemmRequest;
using wire::DecodeStreamRequest;
using wire::EncodeGemmResponse;
using wire::EncodeMessage;
using wire::EncodeResultChunk;

double ToMs(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

absl::Time CallDeadline(const grpc::CallbackServerContext* context) {
  const auto deadline = context->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

// Where an operand's bytes go in a job's host storage.
float* OperandData(GemmJob& job, v1::Operand operand) {
  switch (operand) {
    case v1::OPERAND_A:
      return job.a();
    case v1::OPERAND_B:
      return job.b();
    case v1::OPERAND_C:
      return job.c();
    default:
      return nullptr;
  }
}

// One GemmStream call. Reads job parts, submits complete jobs, writes
// results back one message at a time. Messages are handled as raw byte
// buffers (proto/wire_codec.h): operand bytes are copied once, from gRPC's
// slices into the job's storage, and result chunks leave from the job's own
// memory without a copy. gRPC operations are never started with mu_ held:
// their reactions may run inline.
class GemmStreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  GemmStreamReactor(GemmServiceImpl* service,
                    grpc::CallbackServerContext* context)
      : service_(service), context_(context) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      {
        absl::MutexLock lock(&mu_);
        reads_done_ = true;
        // Jobs the client started but never ended can no longer complete.
        for (auto& [id, receiving] : receiving_) {
          (void)receiving;
          QueueError(id, absl::InvalidArgumentError(absl::StrCat(
                             "job_id ", id,
                             ": stream closed before the job's end_of_job")));
        }
        receiving_.clear();
      }
      Pump();
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      absl::Status decoded = DecodeStreamRequest(request_, &decoded_);
      if (decoded.ok()) {
        HandleRequest(decoded_);
      } else {
        // Not attributable to a job for sure; reported under the id the
        // message carried, if any, and the stream goes on.
        service_->CountRejected();
        QueueError(decoded_.header.job_id(), std::move(decoded));
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

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) write_failed_ = true;
    }
    Pump();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    for (auto& [id, receiving] : receiving_) receiving.job->Cancel();
    for (const auto& job : running_) job->Cancel();
  }

  void OnDone() override {
    // A scheduler thread that decided kNone may still be leaving mu_.
    { absl::MutexLock lock(&mu_); }
    delete this;
  }

 private:
  struct Receiving {
    std::shared_ptr<GemmJob> job;
    uint64_t received[4] = {0, 0, 0, 0};  // indexed by v1::Operand
    uint64_t inline_result_max_bytes = 0;  // from the job's params
  };
  // A message still to send: a job's result (chunks, then its end record)
  // or a failed job's end record.
  struct Outgoing {
    uint64_t job_id = 0;
    absl::Status status;
    std::shared_ptr<GemmJob> job;  // set for a successful result
    uint64_t offset = 0;           // next byte of C to send
    // C goes inside the JobEnd (JobEnd.c) rather than in chunks.
    bool inline_result = false;
  };

  void QueueError(uint64_t id, absl::Status status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    outbox_.push_back(Outgoing{id, std::move(status), nullptr, 0, false});
  }

  // Ends job `id` with `status`: drops its partial data and ignores its
  // remaining parts unless `ended` (the failing message ended the job).
  void FailJob(uint64_t id, absl::Status status, bool ended)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    receiving_.erase(id);
    if (!ended) {
      // A client that stops sending a failed job never ends it; keep the
      // set of such ids bounded (a forgotten id only means its stray parts
      // get an error of their own).
      if (discarding_.size() >= kMaxDiscarding) discarding_.clear();
      discarding_.insert(id);
    }
    service_->CountRejected();
    QueueError(id, std::move(status));
  }

  void HandleRequest(const DecodedRequest& in)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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
        return FailJob(id,
                       absl::InvalidArgumentError(absl::StrCat(
                           "job_id ", id,
                           ": params sent again while the job is open")),
                       ended);
      }
      absl::StatusOr<JobSpec> spec =
          ValidateParams(req.params(), service_->options().limits,
                         service_->executor());
      if (!spec.ok()) return FailJob(id, spec.status(), ended);
      absl::StatusOr<std::shared_ptr<GemmJob>> job = service_->NewJob(*spec);
      if (!job.ok()) return FailJob(id, job.status(), ended);
      it = receiving_.emplace(id, Receiving{std::move(*job)}).first;
      it->second.inline_result_max_bytes =
          req.params().inline_result_max_bytes();
    } else if (it == receiving_.end()) {
      return FailJob(id,
                     absl::InvalidArgumentError(absl::StrCat(
                         "job_id ", id,
                         ": data for a job that was not started; its first "
                         "message must carry params")),
                     ended);
    }
    Receiving& receiving = it->second;
    if (in.data.size > 0) {
      absl::Status s = AppendChunk(in, receiving);
      if (!s.ok()) return FailJob(id, std::move(s), ended);
    }
    if (!ended) return;

    std::shared_ptr<GemmJob> job = std::move(receiving.job);
    const uint64_t got[4] = {receiving.received[0], receiving.received[1],
                             receiving.received[2], receiving.received[3]};
    const uint64_t inline_max = receiving.inline_result_max_bytes;
    receiving_.erase(it);
    absl::Status s = CheckOperandBytes(job->problem(), got[v1::OPERAND_A],
                                       got[v1::OPERAND_B], got[v1::OPERAND_C]);
    if (!s.ok()) {
      service_->CountRejected();
      return QueueError(id, absl::InvalidArgumentError(
                                absl::StrCat("job_id ", id, ": ", s.message())));
    }
    Submit(id, std::move(job), inline_max);
  }

  // A job whose params and operands all came in one message (req.job):
  // one copy of each operand into the job's (pinned) storage, no
  // reassembly.
  void HandleWholeJob(const DecodedRequest& in)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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
    absl::StatusOr<JobSpec> spec = ValidateParams(
        whole.params(), service_->options().limits, service_->executor());
    if (!spec.ok()) return fail(spec.status());
    absl::Status s = CheckOperandBytes(spec->problem, in.job_a.size,
                                       in.job_b.size, in.job_c.size);
    if (!s.ok()) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("job_id ", id, ": ", s.message())));
    }
    absl::StatusOr<std::shared_ptr<GemmJob>> job = service_->NewJob(*spec);
    if (!job.ok()) return fail(job.status());
    in.job_a.CopyTo(reinterpret_cast<char*>((*job)->a()));
    in.job_b.CopyTo(reinterpret_cast<char*>((*job)->b()));
    if (spec->problem.beta != 0.0f) {
      in.job_c.CopyTo(reinterpret_cast<char*>((*job)->c()));
    }
    Submit(id, std::move(*job), whole.params().inline_result_max_bytes());
  }

  absl::Status AppendChunk(const DecodedRequest& in, Receiving& receiving)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const v1::StreamRequest& req = in.header;
    const v1::Operand op = req.operand();
    float* base = OperandData(*receiving.job, op);
    if (base == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job_id ", req.job_id(),
          ": operand: must be OPERAND_A, OPERAND_B or OPERAND_C when data is "
          "set, got ",
          static_cast<int>(op)));
    }
    const uint64_t expected = ExpectedBytes(receiving.job->problem(), op);
    uint64_t& received = receiving.received[op];
    if (req.offset() != received) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "job_id %d: offset: chunks of %s must arrive in order; expected "
          "offset %d, got %d",
          req.job_id(), v1::Operand_Name(op), received, req.offset()));
    }
    if (received + in.data.size > expected) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "job_id %d: data: %s would grow to %d bytes, but the shape %s "
          "gives it %d",
          req.job_id(), v1::Operand_Name(op), received + in.data.size,
          receiving.job->problem().ToString(), expected));
    }
    // The one copy of an operand byte on the server: from gRPC's slices
    // into the job's (pinned) storage.
    in.data.CopyTo(reinterpret_cast<char*>(base) + received);
    received += in.data.size;
    return absl::OkStatus();
  }

  void Submit(uint64_t id, std::shared_ptr<GemmJob> job,
              uint64_t inline_result_max_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    job->set_call_deadline(CallDeadline(context_));
    // The context lives as long as this reactor, which outlives its jobs.
    job->set_cancel_check([context = context_] {
      return context->IsCancelled();
    });
    job->MarkReady(absl::Now());
    // Never beyond one result chunk, so an inline result always fits the
    // server's largest message.
    const bool inline_result =
        4 * job->problem().c_elements() <=
        std::min(inline_result_max_bytes,
                 service_->options().limits.result_chunk_bytes);
    job->set_done_callback(
        [this, id, inline_result](GemmJob& done, absl::Status status) {
          OnJobDone(id, inline_result, done, std::move(status));
        });
    running_.insert(job);
    ++pending_;
    absl::Status s = service_->scheduler().Submit(job);
    if (!s.ok()) {
      running_.erase(job);
      --pending_;
      service_->CountRejected();
      QueueError(id, std::move(s));
    }
  }

  // Runs on a scheduler thread. The reactor stays alive: Finish() waits
  // for pending_ to reach 0.
  void OnJobDone(uint64_t id, bool inline_result, GemmJob& job,
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
        outbox_.push_back(Outgoing{id, absl::OkStatus(), std::move(owned), 0,
                                   inline_result});
      } else {
        QueueError(id, std::move(status));
      }
      // Decided in the same critical section that lowered pending_: once it
      // is unlocked, a gRPC thread may finish the call and delete this
      // reactor, so after kNone this thread must not touch it again.
      next = DecideLocked(&final_status);
    }
    Act(next, final_status);
  }

  enum class Next { kNone, kWrite, kFinish };

  // What to start next: a write, the end of the call, or nothing. Started by
  // Act() after mu_ is released, since gRPC reactions may run inline.
  Next DecideLocked(grpc::Status* final_status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || writing_) return Next::kNone;
    if (write_failed_ || cancelled_) outbox_.clear();
    if (!outbox_.empty()) {
      NextMessage(&response_);
      writing_ = true;  // holds off Finish() until OnWriteDone
      // Set while no write is in flight; read by Act() for this write only.
      write_options_ = grpc::WriteOptions();
      if (service_->options().coalesce_small_writes && !outbox_.empty() &&
          response_.Length() <= wire::kCoalesceMaxBytes) {
        // The next message follows at once (OnWriteDone), and the last of a
        // run goes without the hint, so nothing waits for long.
        write_options_.set_buffer_hint();
      }
      return Next::kWrite;
    }
    if (reads_done_ && pending_ == 0) {
      finished_ = true;
      *final_status = cancelled_ || write_failed_
                          ? grpc::Status(grpc::StatusCode::CANCELLED,
                                         "stream cancelled")
                          : grpc::Status::OK;
      return Next::kFinish;
    }
    return Next::kNone;
  }

  void Act(Next next, const grpc::Status& final_status) {
    if (next == Next::kWrite) StartWrite(&response_, write_options_);
    if (next == Next::kFinish) Finish(final_status);
  }

  // Starts the next write, or finishes the call once nothing is left.
  // Called from reactions (OnReadDone, OnWriteDone), during which gRPC
  // keeps the reactor alive.
  void Pump() {
    grpc::Status final_status;
    Next next;
    {
      absl::MutexLock lock(&mu_);
      next = DecideLocked(&final_status);
    }
    Act(next, final_status);
  }

  void NextMessage(grpc::ByteBuffer* buffer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Outgoing& out = outbox_.front();
    if (out.job != nullptr) {
      const uint64_t total = 4 * out.job->problem().c_elements();
      if (!out.inline_result && out.offset < total) {
        const uint64_t n = std::min<uint64_t>(
            service_->options().limits.result_chunk_bytes, total - out.offset);
        // No copy: the chunk's bytes are the job's C, kept alive by the
        // buffer until gRPC has sent them.
        *buffer = EncodeResultChunk(
            out.job_id, out.offset,
            reinterpret_cast<const char*>(out.job->c()) + out.offset, n,
            out.job);
        out.offset += n;
        return;
      }
    }
    v1::StreamResponse message;
    v1::StreamResponse* response = &message;
    response->set_job_id(out.job_id);
    if (out.job != nullptr) {
      const uint64_t total = 4 * out.job->problem().c_elements();
      v1::JobEnd* end = response->mutable_end();
      end->set_code(0);
      FillTiming(*out.job, end->mutable_timing());
      if (out.inline_result) {
        end->set_c(reinterpret_cast<const char*>(out.job->c()), total);
      }
    } else {
      v1::JobEnd* end = response->mutable_end();
      end->set_code(static_cast<int>(out.status.code()));
      end->set_message(std::string(out.status.message()));
    }
    *buffer = EncodeMessage(message);
    outbox_.pop_front();
  }

  static constexpr size_t kMaxDiscarding = 4096;

  GemmServiceImpl* const service_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer request_;   // owned by the read in flight
  grpc::ByteBuffer response_;  // owned by the write in flight
  grpc::WriteOptions write_options_;  // of the write in flight
  DecodedRequest decoded_ ABSL_GUARDED_BY(mu_);  // reused between reads

  absl::Mutex mu_;
  std::unordered_map<uint64_t, Receiving> receiving_ ABSL_GUARDED_BY(mu_);
  std::unordered_set<uint64_t> discarding_ ABSL_GUARDED_BY(mu_);
  std::unordered_set<std::shared_ptr<GemmJob>> running_ ABSL_GUARDED_BY(mu_);
  std::deque<Outgoing> outbox_ ABSL_GUARDED_BY(mu_);
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

void FillTiming(const GemmJob& job, v1::Timing* timing) {
  const JobTiming& t = job.timing();
  timing->set_queue_ms(ToMs(t.queued));
  timing->set_batch_size(t.batch_size);
  timing->set_h2d_ms(ToMs(t.h2d));
  timing->set_compute_ms(ToMs(t.compute));
  timing->set_d2h_ms(ToMs(t.d2h));
  timing->set_server_ms(ToMs(t.server));
  timing->set_kernel(job.kernel());
  timing->set_device(t.device);
  // For a batched launch, compute covers the whole batch and the batch's
  // rate is batch_size times this figure.
  const double seconds = absl::ToDoubleSeconds(t.compute);
  timing->set_gflops(seconds > 0 ? job.problem().flops() / seconds / 1e9 : 0.0);
}

GemmServiceImpl::GemmServiceImpl(const Options& options, Executor* executor,
                                 BatchScheduler* scheduler)
    : options_(options),
      executor_(executor),
      scheduler_(scheduler),
      budget_(options.limits.max_inflight_bytes) {}

absl::StatusOr<std::shared_ptr<GemmJob>> GemmServiceImpl::NewJob(
    const JobSpec& spec) {
  InflightBudget::Reservation reservation;
  RETURN_IF_ERROR(budget_.Reserve(spec.problem.total_bytes(), &reservation));
  return std::make_shared<GemmJob>(spec, std::move(reservation),
                                   options_.host_allocator);
}

grpc::ServerUnaryReactor* GemmServiceImpl::Info(
    grpc::CallbackServerContext* context, const v1::InfoRequest* /*request*/,
    v1::InfoResponse* response) {
  response->set_version(options_.version);
  response->set_backend(std::string(executor_->backend()));
  for (const DeviceDescription& d : executor_->devices()) {
    v1::Device* device = response->add_devices();
    device->set_id(d.id);
    device->set_name(d.name);
    device->set_memory_bytes(d.memory_bytes);
    device->set_compute_capability(d.compute_capability);
  }
  for (const std::string& name : executor_->kernels()) {
    response->add_kernels(name);
  }
  const ServiceLimits& l = options_.limits;
  v1::Limits* limits = response->mutable_limits();
  limits->set_max_dim(l.max_dim);
  limits->set_max_job_bytes(l.max_job_bytes);
  limits->set_max_message_bytes(l.max_message_bytes);
  limits->set_max_queued_jobs(scheduler_->options().max_queued_jobs);
  limits->set_max_inflight_bytes(l.max_inflight_bytes);
  limits->set_result_chunk_bytes(l.result_chunk_bytes);
  v1::ServerStats* stats = response->mutable_stats();
  stats->set_jobs_ok(scheduler_->completed_ok());
  stats->set_jobs_failed(scheduler_->completed_failed());
  stats->set_jobs_rejected(rejected_.load());
  stats->set_uptime_s(absl::ToDoubleSeconds(absl::Now() - start_time_));
  v1::Batching* batching = response->mutable_batching();
  batching->set_max_batch_size(scheduler_->options().max_batch_size);
  batching->set_max_queue_delay_us(absl::ToInt64Microseconds(
      scheduler_->options().max_queue_delay));
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* GemmServiceImpl::Gemm(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto start = [&]() -> absl::Status {
    // Operands stay in gRPC's slices until copied, once, into the job.
    DecodedGemmRequest in;
    RETURN_IF_ERROR(DecodeGemmRequest(*request, &in));
    if (!in.header.has_params()) {
      return absl::InvalidArgumentError("params: missing");
    }
    ASSIGN_OR_RETURN(JobSpec spec, ValidateParams(in.header.params(),
                                                  options_.limits, *executor_));
    RETURN_IF_ERROR(
        CheckOperandBytes(spec.problem, in.a.size, in.b.size, in.c.size));
    ASSIGN_OR_RETURN(std::shared_ptr<GemmJob> job, NewJob(spec));
    in.a.CopyTo(reinterpret_cast<char*>(job->a()));
    in.b.CopyTo(reinterpret_cast<char*>(job->b()));
    if (spec.problem.beta != 0.0f) in.c.CopyTo(reinterpret_cast<char*>(job->c()));
    job->set_call_deadline(CallDeadline(context));
    job->set_cancel_check([context] { return context->IsCancelled(); });
    job->MarkReady(absl::Now());
    // The result leaves from the job's own memory (no copy); the response
    // holds the job until gRPC has sent it.
    std::weak_ptr<GemmJob> weak = job;
    job->set_done_callback(
        [reactor, response, weak](GemmJob& done, absl::Status status) {
          if (status.ok()) {
            v1::Timing timing;
            FillTiming(done, &timing);
            *response = EncodeGemmResponse(
                reinterpret_cast<const char*>(done.c()),
                4 * done.problem().c_elements(), timing, weak.lock());
          }
          reactor->Finish(ToGrpcStatus(status));
        });
    return scheduler_->Submit(std::move(job));
  };
  absl::Status status = start();
  if (!status.ok()) {
    CountRejected();
    reactor->Finish(ToGrpcStatus(status));
  }
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
GemmServiceImpl::GemmStream(grpc::CallbackServerContext* context) {
  return new GemmStreamReactor(this, context);
}

}  // namespace gemm::server
