// HealthService: grpc.health.v1.Health (Check and Watch), served through
// gRPC's generic API in place of gRPC's own service
// (EnableDefaultHealthCheckService). gRPC's Check is a registered unary
// method, and gRPC drops a call of one that its client resets before
// sending the request without the server seeing it: a rapid reset of
// health checks went uncounted by the early-cancel guard
// (early_cancel_interceptor.h). Served here, every call is seen.
//
// The services are "" (the whole server, SERVING from the start) and those
// given to SetServingStatus. Check answers a known service's status and
// NOT_FOUND for another; Watch sends the status at once (SERVICE_UNKNOWN
// for an unknown service) and again at each change, until its client ends
// it or Shutdown(). Both decode their request as protobuf does: a request
// that is not a HealthCheckRequest gets INVALID_ARGUMENT. Given a
// UnaryReadGate, each reads its request in its client's turn (the caller's
// address: health asks for no token), as the service's unary calls do, so
// that large requests cannot fill gRPC's buffers.
//
// Thread-safety: thread-safe.
//
//   HealthService health;
//   health.SetServingStatus("gemm.v1.GemmService", true);
//   // in a grpc::CallbackGenericService's CreateReactor:
//   if (auto* reactor = health.CreateReactor(context)) return reactor;
//   health.SetServingStatus(false);  // draining
//   health.Shutdown();               // before grpc::Server::Shutdown
#ifndef GEMM_SERVER_OBSERVABILITY_HEALTH_SERVICE_H_
#define GEMM_SERVER_OBSERVABILITY_HEALTH_SERVICE_H_

#include <map>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/support/server_callback.h"
#include "server/edge/unary_read_gate.h"

namespace gemm::server {

class HealthService {
 public:
  static constexpr char kServiceName[] = "grpc.health.v1.Health";
  // HealthCheckResponse.ServingStatus.
  enum Status {
    kUnknown = 0,
    kServing = 1,
    kNotServing = 2,
    kServiceUnknown = 3
  };

  HealthService();
  ~HealthService();  // after the server has stopped: no call is open

  // The status of `service` ("": the whole server), known from now on.
  void SetServingStatus(const std::string& service, bool serving);
  // The status of every known service.
  void SetServingStatus(bool serving);
  // Every service NOT_SERVING for good, and every Watch ended
  // (UNAVAILABLE), so that a server shutting down does not wait for them.
  void Shutdown();

  // A reactor for a call of Check or Watch, reading in its turn at `gate`
  // (nullptr: at once); nullptr for another method. `gate` must outlive
  // the call.
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context,
      UnaryReadGate* gate = nullptr);

  // The status Check would answer for `service`, or kServiceUnknown.
  Status StatusOf(const std::string& service) const;

 private:
  class Call;
  class Check;
  class Watch;

  // Sends `watch` its service's status, then each change of it; false
  // after Shutdown().
  bool AddWatch(Watch* watch);
  void RemoveWatch(Watch* watch);

  mutable absl::Mutex mu_;
  std::map<std::string, Status> services_ ABSL_GUARDED_BY(mu_);
  std::set<Watch*> watches_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_OBSERVABILITY_HEALTH_SERVICE_H_
