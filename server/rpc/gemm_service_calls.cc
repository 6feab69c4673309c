// GemmServiceImpl's calls: the unary Gemm calls and the other unary
// methods, served through gRPC's generic API (UnaryCalls), each reading its
// request in its client's turn (UnaryReadGate); the refusals of calls that
// are not served; and GemmStream's reactors. The rest of the service is in
// gemm_service.cc, the region calls in gemm_service_regions.cc.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/wire_codec.h"
#include "server/core/wire_timing.h"
#include "server/edge/client_identity.h"
#include "server/edge/gated_unary_call.h"
#include "server/rpc/gemm_service.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

// The unary method served through the generic API.
constexpr char kGemmMethod[] = "/gemm.v1.GemmService/Gemm";
constexpr char kGemmStreamMethod[] = "/gemm.v1.GemmService/GemmStream";
constexpr char kNoRequestMessage[] =
    "the unary call ended without its request message";

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

// One unary Gemm call, served as a stream of the generic API: it waits for
// its client's turn to read (UnaryReadGate), reads its one request message
// and ends as a unary call does, with one response and the status, or the
// status alone. It lives until gRPC is done with it (OnDone), which is
// after Answer().
class GemmServiceImpl::UnaryGemmCall final : public GatedUnaryCall {
 public:
  UnaryGemmCall(GemmServiceImpl* service, grpc::CallbackServerContext* context,
                std::string client)
      : GatedUnaryCall(&service->read_gate_, std::move(client)),
        service_(service),
        context_(context),
        // Only the early-cancel guard needs it.
        peer_(service->options_.max_client_early_cancels > 0 ? context->peer()
                                                             : std::string()) {
    service_->open_unary_calls_.fetch_add(1);
  }

  grpc::CallbackServerContext* context() const { return context_; }

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

  // Ends a call whose job was never declared (no turn, no message):
  // logged, counted, and answered unless `answer` is false.
  void Refuse(const absl::Status& status) override { Refuse(status, true); }
  void Refuse(const absl::Status& status, bool answer) {
    service_->CountRefusedUnary(client(), nullptr, status);
    if (answer) Answer(status);
  }

  void OnRequest(bool ok) override {
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
  // The peer as the call began (gRPC forgets it once the call is over),
  // and when.
  const std::string peer_;
  const std::chrono::system_clock::time_point began_ =
      std::chrono::system_clock::now();
  grpc::ByteBuffer response_;
  // OnRequest(false) answered; OnDone logs and counts the refusal.
  bool read_failed_ = false;
  // The request was read and handed to AdmitUnary.
  bool admitted_ = false;
};

// A unary call other than Gemm (Info, the region calls), served as a stream
// of the generic API: reads its one request message in its client's turn
// (UnaryReadGate, as Gemm's: a request may be as large as any), hands it
// to its method, and ends as a unary call does once the method answers. It
// lives until gRPC is done with it (OnDone), which is after the answer.
class GemmServiceImpl::SmallUnaryCall final : public GatedUnaryCall {
 public:
  SmallUnaryCall(GemmServiceImpl* service, grpc::CallbackServerContext* context,
                 std::string client, Serve serve)
      : GatedUnaryCall(&service->read_gate_, std::move(client)),
        service_(service),
        context_(context),
        serve_(serve) {}

  void Refuse(const absl::Status& status) override {
    Finish(ToGrpcStatus(status));
  }

  void OnRequest(bool ok) override {
    if (!ok) {
      // The caller half-closed without a message (it gets this status),
      // or the call is over (gRPC has answered it).
      Finish(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, kNoRequestMessage));
      return;
    }
    (service_->*serve_)(
        *context_, *request(),
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
  const Serve serve_;
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
      // The caller may make its next call as soon as it has the answer.
      done.ReleaseJobShare();
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

}  // namespace gemm::server
