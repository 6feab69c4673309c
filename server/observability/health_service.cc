#include "server/observability/health_service.h"

#include <utility>
#include <vector>

#include "proto/grpc/health/v1/health.pb.h"
#include "proto/wire_codec.h"
#include "server/core/grpc_status.h"
#include "server/edge/client_identity.h"
#include "server/edge/gated_unary_call.h"

namespace gemm::server {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

constexpr char kCheckMethod[] = "/grpc.health.v1.Health/Check";
constexpr char kWatchMethod[] = "/grpc.health.v1.Health/Watch";
constexpr char kNoRequestMessage[] =
    "the health call ended without its request message";

grpc::ByteBuffer Encode(HealthService::Status status) {
  HealthCheckResponse response;
  response.set_status(static_cast<HealthCheckResponse::ServingStatus>(status));
  return wire::EncodeMessage(response);
}

}  // namespace

// A health call's reading of its one request: in its client's turn at the
// gate when there is one (GatedUnaryCall). Subclasses take the request's
// service in OnService, and end the call, once, in FinishOnce.
class HealthService::Call : public GatedUnaryCall {
 public:
  using GatedUnaryCall::GatedUnaryCall;

  void Refuse(const absl::Status& status) final {
    FinishOnce(ToGrpcStatus(status));
  }

  void OnRequest(bool ok) final {
    if (!ok) {
      FinishOnce(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, kNoRequestMessage));
      return;
    }
    HealthCheckRequest in;
    const absl::Status decoded = wire::DecodeMessage(*request(), &in);
    if (!decoded.ok()) {
      FinishOnce(ToGrpcStatus(decoded));
      return;
    }
    OnService(in.service());
  }

 protected:
  virtual void OnService(const std::string& service) = 0;
  virtual void FinishOnce(const grpc::Status& status) = 0;
};

// One Check call: answers the service's status.
class HealthService::Check final : public HealthService::Call {
 public:
  Check(const HealthService* health, UnaryReadGate* gate, std::string client)
      : Call(gate, std::move(client)), health_(health) {}

  void OnDone() override { delete this; }

 private:
  void OnService(const std::string& service) override {
    const Status status = health_->StatusOf(service);
    if (status == kServiceUnknown) {
      Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "no health status for service \"" + service +
                              "\" (the server's is \"\")"));
      return;
    }
    response_ = Encode(status);
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }
  // Its paths to an end exclude one another: a refusal, a cancel while
  // waiting, a failed read, or the answer.
  void FinishOnce(const grpc::Status& status) override { Finish(status); }

  const HealthService* const health_;
  grpc::ByteBuffer response_;
};

// One Watch call: reads the request, then writes the service's status and
// each change of it, one write at a time (the latest status waits for the
// write before it), until its client ends it or the service shuts down.
// Unlike the other reactors (docs/reference/design.md), it starts writes and
// its Finish with its lock held, and the service's (Update, End): a change
// comes from any thread, and the lock keeps a write from racing the
// Finish of a cancel. gRPC 1.51 runs no reaction of a non-default reactor
// inline, so none comes back into the lock; the service's lock is always
// taken before a watch's.
class HealthService::Watch final : public HealthService::Call {
 public:
  Watch(HealthService* health, UnaryReadGate* gate, std::string client)
      : Call(gate, std::move(client)), health_(health) {}

  const std::string& service() const { return service_; }

  // A new status of service(); the service's lock is held.
  void Update(Status status) {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    pending_ = status;
    if (!writing_ && pending_ != sent_) WriteLocked();
  }

  // Ends the call (the service is shutting down); the service's lock is
  // held.
  void End() {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    ending_ = true;
    if (!writing_)
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                "the server is shutting down"));
  }

  void OnService(const std::string& service) override {
    service_ = service;
    watching_ = health_->AddWatch(this);
    if (!watching_) {
      absl::MutexLock lock(&mu_);
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                "the server is shutting down"));
    }
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (finished_) return;
    if (!ok) {
      // The call is over (cancelled); OnCancel finishes it.
      return;
    }
    // The last status goes out before the end.
    if (pending_ != sent_) {
      WriteLocked();
    } else if (ending_) {
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                "the server is shutting down"));
    }
  }

  void OnCancel() override {
    Call::OnCancel();
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void FinishOnce(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    FinishLocked(status);
  }

  void OnDone() override {
    if (watching_) health_->RemoveWatch(this);
    delete this;
  }

 private:
  void WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    sent_ = pending_;
    response_ = Encode(sent_);
    writing_ = true;
    StartWrite(&response_);
  }

  void FinishLocked(const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  HealthService* const health_;
  std::string service_;
  // Set once AddWatch succeeded; read in OnDone, after every callback.
  bool watching_ = false;
  absl::Mutex mu_;
  grpc::ByteBuffer response_ ABSL_GUARDED_BY(mu_);
  Status pending_ ABSL_GUARDED_BY(mu_) = kUnknown;
  // What was written last (kUnknown: nothing yet; never a status here).
  Status sent_ ABSL_GUARDED_BY(mu_) = kUnknown;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

HealthService::HealthService() { services_[""] = kServing; }

HealthService::~HealthService() = default;

void HealthService::SetServingStatus(const std::string& service, bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  const Status status = serving ? kServing : kNotServing;
  services_[service] = status;
  for (Watch* watch : watches_) {
    if (watch->service() == service) watch->Update(status);
  }
}

void HealthService::SetServingStatus(bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  const Status status = serving ? kServing : kNotServing;
  for (auto& [name, now] : services_) now = status;
  for (Watch* watch : watches_) {
    if (services_.count(watch->service()) != 0) watch->Update(status);
  }
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  shut_down_ = true;
  for (auto& [name, now] : services_) now = kNotServing;
  for (Watch* watch : watches_) {
    if (services_.count(watch->service()) != 0) watch->Update(kNotServing);
    watch->End();
  }
}

HealthService::Status HealthService::StatusOf(
    const std::string& service) const {
  absl::MutexLock lock(&mu_);
  auto it = services_.find(service);
  return it == services_.end() ? kServiceUnknown : it->second;
}

bool HealthService::AddWatch(Watch* watch) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return false;
  watches_.insert(watch);
  // Under the lock, so that no change is sent before this first status.
  auto it = services_.find(watch->service());
  watch->Update(it == services_.end() ? kServiceUnknown : it->second);
  return true;
}

void HealthService::RemoveWatch(Watch* watch) {
  absl::MutexLock lock(&mu_);
  watches_.erase(watch);
}

grpc::ServerGenericBidiReactor* HealthService::CreateReactor(
    grpc::GenericCallbackServerContext* context, UnaryReadGate* gate) {
  Call* call = nullptr;
  // By address: health asks for no token.
  if (context->method() == kCheckMethod) {
    call = new Check(this, gate, ClientIdentityOfPeer(context->peer()));
  } else if (context->method() == kWatchMethod) {
    call = new Watch(this, gate, ClientIdentityOfPeer(context->peer()));
  } else {
    return nullptr;
  }
  call->Begin();
  return call;
}

}  // namespace gemm::server
