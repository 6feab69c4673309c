#include "server/gemm_service.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "common/status_macros.h"
#include "proto/wire_codec.h"
#include "server/client_identity.h"
#include "server/wire_timing.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

JobIntake::Options IntakeOptions(const GemmServiceImpl::Options& options,
                                 RegionRegistry* regions) {
  JobIntake::Options intake;
  intake.regions = regions;
  intake.limits = options.limits;
  intake.host_allocator = options.host_allocator;
  intake.client_shares.max_bytes_per_client =
      options.limits.max_client_inflight_bytes;
  intake.client_shares.max_jobs_per_client = options.limits.max_client_jobs;
  intake.metrics = options.metrics;
  return intake;
}

GemmStreamReactor::Options StreamOptions(
    const GemmServiceImpl::Options& options, GemmServiceImpl* service) {
  GemmStreamReactor::Options stream;
  stream.on_early_cancel = [service](
                               const std::string& peer,
                               std::chrono::system_clock::time_point began,
                               std::chrono::system_clock::time_point deadline) {
    service->NoteEarlyCancel(peer, began, deadline);
  };
  stream.result_chunk_bytes = options.limits.result_chunk_bytes;
  stream.coalesce_small_writes = options.coalesce_small_writes;
  stream.job_stall_timeout = options.limits.job_stall_timeout;
  stream.max_open_jobs = options.limits.max_open_jobs_per_stream;
  return stream;
}

// The unary method served through the generic API.
constexpr char kGemmMethod[] = "/gemm.v1.GemmService/Gemm";
constexpr char kGemmStreamMethod[] = "/gemm.v1.GemmService/GemmStream";
constexpr char kNoRequestMessage[] =
    "the unary call ended without its request message";

UnaryReadGate::Options ReadGateOptions(
    const GemmServiceImpl::Options& options) {
  UnaryReadGate::Options gate;
  gate.max_reads_per_client = options.max_client_unary_reads;
  gate.max_waiting_per_client = options.limits.max_client_jobs;
  return gate;
}

// A call refused before anything is read (UNAUTHENTICATED, UNIMPLEMENTED).
// Given `service`, a call that its client cancelled before the refusal went
// out is an early cancel (a caller without a token resetting Gemm or
// GemmStream calls, which the interceptor leaves to the service).
class RefusedStream
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit RefusedStream(const grpc::Status& status,
                         grpc::CallbackServerContext* context = nullptr,
                         GemmServiceImpl* service = nullptr)
      : context_(context),
        service_(service),
        peer_(service != nullptr ? context->peer() : std::string()) {
    Finish(status);
  }
  void OnDone() override {
    if (service_ != nullptr && context_->IsCancelled()) {
      service_->NoteEarlyCancel(peer_, began_, context_->deadline());
    }
    delete this;
  }

 private:
  grpc::CallbackServerContext* const context_;
  GemmServiceImpl* const service_;
  const std::string peer_;
  const std::chrono::system_clock::time_point began_ =
      std::chrono::system_clock::now();
};

}  // namespace

GemmServiceImpl::GemmServiceImpl(const Options& options, Executor* executor,
                                 BatchScheduler* scheduler)
    : options_(options),
      executor_(executor),
      scheduler_(scheduler),
      regions_(options.regions, executor),
      intake_(IntakeOptions(options, &regions_), executor, scheduler),
      stream_options_(StreamOptions(options, this)),
      read_gate_(ReadGateOptions(options)),
      cancel_flood_({.max_early_cancels = options.max_client_early_cancels,
                     .shut_out_for = options.shut_out_for}) {
  const absl::Duration stall = options.limits.job_stall_timeout;
  const absl::Duration idle = options.regions.idle_timeout;
  absl::Duration period = absl::Seconds(1);
  if (stall > absl::ZeroDuration()) period = std::min(period, stall / 4);
  if (idle > absl::ZeroDuration()) period = std::min(period, idle / 4);
  period = std::max(period, absl::Milliseconds(10));
  sweeper_ = std::thread([this, period, stall] {
    absl::Time last_trim = absl::Now();
    while (!stop_sweeping_.WaitForNotificationWithTimeout(period)) {
      const absl::Time now = absl::Now();
      if (stall > absl::ZeroDuration()) streams_.ExpireStalled(now);
      regions_.ExpireIdle(now);
      // Memory freed after a burst (or an attack) stays with the process
      // under the allocator's 1 GiB trim threshold (process_tuning.h);
      // give it back to the system every 10 s. Of gemm-server's two
      // arenas, the main one's top is trimmed too; the other's stays (at
      // most one 64 MiB heap).
      if (now - last_trim >= absl::Seconds(10)) {
        malloc_trim(0);
        last_trim = now;
      }
    }
  });
}

GemmServiceImpl::~GemmServiceImpl() {
  stop_sweeping_.Notify();
  if (sweeper_.joinable()) sweeper_.join();
}

void GemmServiceImpl::ServeInfo(const grpc::CallbackServerContext& context,
                                const grpc::ByteBuffer& request,
                                Answer answer) {
  absl::Status status = Identify(context).status();
  // InfoRequest has no fields; its bytes must still be a message.
  v1::InfoRequest in;
  if (status.ok()) status = wire::DecodeMessage(request, &in);
  answer(status,
         status.ok() ? wire::EncodeMessage(Describe()) : grpc::ByteBuffer());
}

v1::InfoResponse GemmServiceImpl::Describe() const {
  v1::InfoResponse response;
  response.set_version(options_.version);
  response.set_backend(std::string(executor_->backend()));
  uint64_t mismatches = 0;
  for (const DeviceDescription& d : executor_->devices()) {
    v1::Device* device = response.add_devices();
    device->set_id(d.id);
    device->set_name(d.name);
    device->set_memory_bytes(d.memory_bytes);
    device->set_compute_capability(d.compute_capability);
    device->set_state(d.failure.empty() ? "ok"
                                        : absl::StrCat("failed: ", d.failure));
    device->set_check_mismatches(d.check_mismatches);
    mismatches += d.check_mismatches;
  }
  for (const std::string& name : executor_->kernels()) {
    response.add_kernels(name);
  }
  for (const KernelDescription& k : executor_->kernel_details()) {
    v1::KernelInfo* info = response.add_kernel_details();
    info->set_name(k.name);
    info->set_precision(std::string(PrecisionName(k.precision)));
    info->set_description(k.description);
  }
  const ServiceLimits& l = options_.limits;
  v1::Limits* limits = response.mutable_limits();
  limits->set_max_dim(l.max_dim);
  limits->set_max_job_bytes(l.max_job_bytes);
  limits->set_max_message_bytes(l.max_message_bytes);
  limits->set_max_queued_jobs(scheduler_->options().max_queued_jobs);
  limits->set_max_inflight_bytes(l.max_inflight_bytes);
  limits->set_result_chunk_bytes(l.result_chunk_bytes);
  limits->set_max_regions_per_client(regions_.options().max_regions_per_owner);
  limits->set_region_idle_timeout_s(
      absl::ToDoubleSeconds(regions_.options().idle_timeout));
  v1::ServerStats* stats = response.mutable_stats();
  const JobCounts& counts = intake_.counts();
  stats->set_jobs_ok(counts.ok());
  stats->set_jobs_failed(counts.failed());
  stats->set_jobs_rejected(counts.rejected());
  stats->set_jobs_checked(counts.checked());
  stats->set_check_mismatches(mismatches);
  stats->set_uptime_s(absl::ToDoubleSeconds(absl::Now() - start_time_));
  v1::Batching* batching = response.mutable_batching();
  batching->set_max_batch_size(scheduler_->options().max_batch_size);
  batching->set_max_queue_delay_us(
      absl::ToInt64Microseconds(scheduler_->options().max_queue_delay));
  return response;
}

void GemmServiceImpl::NoteEarlyCancel(
    const std::string& peer, std::chrono::system_clock::time_point began,
    std::chrono::system_clock::time_point deadline) {
  // No rule on how long after it began: under a flood gRPC ends the reset
  // calls seconds late.
  const auto wall = std::chrono::system_clock::now();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    const std::chrono::system_clock::duration slack =
        std::max<std::chrono::system_clock::duration>(
            std::chrono::milliseconds(250), (deadline - began) / 10);
    if (wall >= deadline - slack) return;
  }
  // By address whatever the authentication: it is the connections that go.
  const std::string client = ClientIdentityOfPeer(peer);
  const absl::Time now = absl::Now();
  if (!cancel_flood_.OnEarlyCancel(client, now)) return;
  const size_t closed =
      options_.shut_out ? options_.shut_out(client, now + options_.shut_out_for)
                        : 0;
  spdlog::warn(
      "client {} cancelled more than {} calls before their requests were read "
      "(--max-client-early-cancels; an HTTP/2 rapid reset?): {}",
      QuoteClientText(client), options_.max_client_early_cancels,
      options_.shut_out
          ? absl::StrCat("closed its ", closed,
                         " connection(s), refusing new ones for ",
                         absl::FormatDuration(options_.shut_out_for))
          : std::string("this listener cannot shut it out"));
}

absl::StatusOr<std::string> GemmServiceImpl::Identify(
    const grpc::CallbackServerContext& context) const {
  if (options_.authenticator == nullptr) {
    return ClientIdentityOfPeer(context.peer());
  }
  return options_.authenticator->Identify(context);
}

// One unary Gemm call, served as a stream of the generic API: it waits for
// its client's turn to read (UnaryReadGate), reads its one request message
// and ends as a unary call does, with one response and the status, or the
// status alone. It lives until gRPC is done with it (OnDone), which is
// after Answer().
class GemmServiceImpl::UnaryGemmCall final
    : public grpc::ServerGenericBidiReactor,
      public UnaryReadGate::Waiter {
 public:
  UnaryGemmCall(GemmServiceImpl* service, grpc::CallbackServerContext* context,
                std::string client)
      : service_(service),
        context_(context),
        client_(std::move(client)),
        // Only the early-cancel guard needs it.
        peer_(service->options_.max_client_early_cancels > 0 ? context->peer()
                                                             : std::string()) {
    service_->open_unary_calls_.fetch_add(1);
  }

  // Takes a turn, or waits for one; after construction, since the read may
  // start at once.
  void Begin() {
    const absl::Status status = service_->read_gate_.Enter(client_, this);
    if (!status.ok()) Refuse(status);
  }

  grpc::CallbackServerContext* context() const { return context_; }
  const std::string& client() const { return client_; }
  grpc::ByteBuffer* request() { return &request_; }

  // Ends the call: `response` with OK, or `status` alone. Once only; the
  // call may be gone when it returns.
  void Answer(const absl::Status& status, grpc::ByteBuffer response = {}) {
    service_->open_unary_calls_.fetch_sub(1);
    if (!status.ok()) {
      Finish(ToGrpcStatus(status));
      return;
    }
    response_ = std::move(response);
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }

  void StartReading() override { StartRead(&request_); }

  // Ends a call whose job was never declared (no turn, no message):
  // logged, counted, and answered unless `answer` is false.
  void Refuse(const absl::Status& status) override { Refuse(status, true); }
  void Refuse(const absl::Status& status, bool answer) {
    service_->CountRefusedUnary(client_, nullptr, status);
    if (answer) Answer(status);
  }

  void OnReadDone(bool ok) override {
    // The turn goes to the client's next call whatever came of this one.
    service_->read_gate_.Leave(client_);
    if (!ok) {
      // Either the caller half-closed without a message (it gets this
      // status), or the call is over: cancelled, past its deadline or past
      // the message limit (gRPC has answered it). Which is known for sure
      // only once gRPC is done with the call (IsCancelled() is settled in
      // OnDone); the refusal is logged and counted then.
      read_failed_ = true;
      Answer(absl::InvalidArgumentError(kNoRequestMessage));
      return;
    }
    admitted_ = true;
    service_->AdmitUnary(this);
  }

  void OnCancel() override {
    // A call still waiting for its turn ends here; one being read ends in
    // OnReadDone, one admitted when its job answers.
    if (service_->read_gate_.Withdraw(client_, this)) {
      Refuse(absl::CancelledError(
          "the call ended while waiting for its request to be read"));
    }
  }

  void OnDone() override {
    if (!admitted_ && context_->IsCancelled()) {
      service_->NoteEarlyCancel(peer_, began_, context_->deadline());
    }
    if (read_failed_) {
      Refuse(context_->IsCancelled()
                 ? absl::CancelledError(
                       "the call ended while its request was arriving")
                 : absl::InvalidArgumentError(kNoRequestMessage),
             /*answer=*/false);
    }
    delete this;
  }

 private:
  GemmServiceImpl* const service_;
  grpc::CallbackServerContext* const context_;
  const std::string client_;
  // The peer as the call began (gRPC forgets it once the call is over),
  // and when.
  const std::string peer_;
  const std::chrono::system_clock::time_point began_ =
      std::chrono::system_clock::now();
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  // OnReadDone(false) answered; OnDone logs and counts the refusal.
  bool read_failed_ = false;
  // The request was read and handed to AdmitUnary.
  bool admitted_ = false;
};

// A unary call other than Gemm (Info, the region calls), served as a stream
// of the generic API: reads its one request message in its client's turn
// (UnaryReadGate, as Gemm's: a request may be as large as any), hands it
// to its method, and ends as a unary call does once the method answers. It
// lives until gRPC is done with it (OnDone), which is after the answer.
class GemmServiceImpl::SmallUnaryCall final
    : public grpc::ServerGenericBidiReactor,
      public UnaryReadGate::Waiter {
 public:
  SmallUnaryCall(GemmServiceImpl* service, grpc::CallbackServerContext* context,
                 std::string client, Serve serve)
      : service_(service),
        context_(context),
        client_(std::move(client)),
        serve_(serve) {}

  // Takes a turn, or waits for one; after construction, since the read may
  // start at once.
  void Begin() {
    const absl::Status status = service_->read_gate_.Enter(client_, this);
    if (!status.ok()) Finish(ToGrpcStatus(status));
  }

  void StartReading() override { StartRead(&request_); }
  void Refuse(const absl::Status& status) override {
    Finish(ToGrpcStatus(status));
  }

  void OnCancel() override {
    // A call still waiting for its turn ends here.
    if (service_->read_gate_.Withdraw(client_, this)) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                          "the call ended while waiting for its request to "
                          "be read"));
    }
  }

  void OnReadDone(bool ok) override {
    // The turn goes to the client's next call whatever came of this one.
    service_->read_gate_.Leave(client_);
    if (!ok) {
      // The caller half-closed without a message (it gets this status),
      // or the call is over (gRPC has answered it).
      Finish(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, kNoRequestMessage));
      return;
    }
    (service_->*serve_)(
        *context_, request_,
        [this](const absl::Status& status, grpc::ByteBuffer response) {
          if (!status.ok()) {
            Finish(ToGrpcStatus(status));
            return;
          }
          response_ = std::move(response);
          StartWriteAndFinish(&response_, grpc::WriteOptions(),
                              grpc::Status::OK);
        });
  }

  void OnDone() override { delete this; }

 private:
  GemmServiceImpl* const service_;
  grpc::CallbackServerContext* const context_;
  const std::string client_;
  const Serve serve_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

grpc::ServerGenericBidiReactor* GemmServiceImpl::UnaryCalls::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  static constexpr std::pair<std::string_view, Serve> kSmallCalls[] = {
      {"/gemm.v1.GemmService/Info", &GemmServiceImpl::ServeInfo},
      {"/gemm.v1.GemmService/RegisterRegion",
       &GemmServiceImpl::ServeRegisterRegion},
      {"/gemm.v1.GemmService/UnregisterRegion",
       &GemmServiceImpl::ServeUnregisterRegion},
      {"/gemm.v1.GemmService/ListRegions", &GemmServiceImpl::ServeListRegions},
  };
  if (context->method() != kGemmMethod) {
    if (service_->options_.health != nullptr) {
      if (auto* reactor = service_->options_.health->CreateReactor(
              context, &service_->read_gate_)) {
        return reactor;
      }
    }
    for (const auto& [method, serve] : kSmallCalls) {
      if (context->method() != method) continue;
      // Refused before anything is read, as Gemm is.
      absl::StatusOr<std::string> client = service_->Identify(*context);
      if (!client.ok()) {
        return new RefusedStream(ToGrpcStatus(client.status()));
      }
      auto* call =
          new SmallUnaryCall(service_, context, *std::move(client), serve);
      call->Begin();
      return call;
    }
    return new RefusedStream(grpc::Status(
        grpc::StatusCode::UNIMPLEMENTED,
        absl::StrCat("no method ", QuoteClientText(context->method()),
                     " on this server (gemm.v1.GemmService serves Info, "
                     "Gemm, GemmStream and the region calls)")));
  }
  absl::StatusOr<std::string> client = service_->Identify(*context);
  if (!client.ok()) {
    // A caller refused before it was identified is logged by its address.
    service_->CountRefusedUnary(ClientIdentityOfPeer(context->peer()), nullptr,
                                client.status());
    return new RefusedStream(
        ToGrpcStatus(client.status()), context,
        service_->options_.max_client_early_cancels > 0 ? service_ : nullptr);
  }
  auto* call = new UnaryGemmCall(service_, context, *std::move(client));
  call->Begin();
  return call;
}

void GemmServiceImpl::AdmitUnary(UnaryGemmCall* call) {
  grpc::ByteBuffer* request = call->request();
  intake_.counts().CountReceived(request->Length());
  // For the log of a refused job: its shape, once known.
  std::optional<GemmProblem> shape;
  auto start = [&]() -> absl::Status {
    // Operands stay in gRPC's slices until copied, once, into the job.
    wire::DecodedGemmRequest in;
    RETURN_IF_ERROR(wire::DecodeGemmRequest(*request, &in));
    if (!in.header.has_params()) {
      return absl::InvalidArgumentError("params: missing");
    }
    ASSIGN_OR_RETURN(JobSpec spec, intake_.Validate(in.header.params()));
    shape = spec.problem;
    // The answer must fit in a message too; found out before the job runs.
    if (!spec.result_region.used()) {
      RETURN_IF_ERROR(CheckUnaryResultBytes(spec.problem, intake_.limits()));
    }
    JobIntake::Call admitted = intake_.CallOf(call->context(), call->client());
    ASSIGN_OR_RETURN(
        std::shared_ptr<GemmJob> job,
        intake_.AdmitComplete(spec, in.a, in.b, in.c, "", admitted.share));
    // The operands are the job's now: gRPC's slices go at once rather than
    // when the call ends, which for a result the caller reads slowly may be
    // long after.
    in = wire::DecodedGemmRequest();
    request->Clear();
    // The result leaves from the job's own memory (no copy); the response
    // holds the job until gRPC has sent it.
    std::weak_ptr<GemmJob> weak = job;
    // Runs once, on a scheduler thread; the call lasts until it answers.
    auto answer = [this, call, weak](GemmJob& done, absl::Status status) {
      grpc::ByteBuffer response;
      if (!status.ok()) {
        intake_.events().Failed(call->client(), "unary call", &done.problem(),
                                status);
        intake_.counts().CountFailed(status.code(), done);
      } else {
        v1::Timing timing;
        FillTiming(done, &timing);
        // A result written to the caller's region travels no bytes.
        response = wire::EncodeGemmResponse(
            reinterpret_cast<const char*>(done.c()),
            done.result_in_region() ? 0 : 4 * done.problem().c_elements(),
            timing, weak.lock());
        // A call that has ended (deadline passed, cancelled) takes no
        // result to its caller.
        if (call->context()->IsCancelled()) {
          intake_.counts().CountFailed(absl::StatusCode::kCancelled, done);
        } else {
          intake_.counts().CountSent(response.Length());
          intake_.counts().CountDelivered(done);
        }
      }
      call->Answer(status, std::move(response));
    };
    return intake_.Submit(job, admitted, std::move(answer));
  };
  absl::Status status = start();
  if (!status.ok()) {
    CountRefusedUnary(call->client(), shape.has_value() ? &*shape : nullptr,
                      status);
    call->Answer(status);
  }
}

void GemmServiceImpl::CountRefusedUnary(const std::string& client,
                                        const GemmProblem* shape,
                                        const absl::Status& status) {
  intake_.events().Refused(client, "unary call", shape, status);
  intake_.counts().CountRejected(status.code());
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
GemmServiceImpl::GemmStream(grpc::CallbackServerContext* context) {
  absl::StatusOr<std::string> client = Identify(*context);
  if (!client.ok()) {
    return new RefusedStream(
        ToGrpcStatus(client.status()), context,
        options_.max_client_early_cancels > 0 ? this : nullptr);
  }
  return new GemmStreamReactor(&intake_, &streams_, stream_options_, context,
                               *client);
}

std::vector<std::string> GemmServiceImpl::MethodsCountingEarlyCancels() {
  return {kGemmMethod, kGemmStreamMethod};
}

void GemmServiceImpl::Drain() {
  read_gate_.RefuseAll(absl::UnavailableError(
      "the server is shutting down; the request was not read"));
  // Streams waiting for room try again, and now fail.
  intake_.NotifyCapacity();
  streams_.DrainAll();
}

}  // namespace gemm::server
