// GemmServiceImpl: the gRPC adapter of gemm.v1.GemmService.
//
// A thin edge on the callback API (no thread is blocked per call): Info
// describes the backend, Gemm admits one job through the JobIntake and
// answers from the job's done callback, GemmStream hands the call to a
// GemmStreamReactor. Errors become grpc::Status here (grpc_status.h).
//
// The unary methods (and the health service, health_service.h) are served
// through gRPC's generic API (unary_calls()), so that the service sees each
// call before its message arrives: Gemm's messages are read a few at a time
// per client (unary_read_gate.h), and a call that its client resets before
// sending its request is seen (gRPC drops such a call of a registered unary
// method unseen). Gemm's and GemmStream's reactors count those early
// cancels themselves (NoteEarlyCancel, an HTTP/2 rapid reset); the server's
// interceptor counts the other methods' (early_cancel_interceptor.h,
// MethodsCountingEarlyCancels()).
//
// Thread-safety: thread-safe; gRPC calls it from its own threads.
//
//   GemmServiceImpl service(options, executor, scheduler);
//   builder.RegisterService(&service);
//   builder.RegisterCallbackGenericService(service.unary_calls());
#ifndef GEMM_SERVER_RPC_GEMM_SERVICE_H_
#define GEMM_SERVER_RPC_GEMM_SERVICE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "proto/gemm.grpc.pb.h"
#include "server/admission/validation.h"
#include "server/core/executor.h"
#include "server/core/gemm_job.h"
#include "server/core/grpc_status.h"
#include "server/edge/call_auth.h"
#include "server/edge/cancel_flood_guard.h"
#include "server/edge/unary_read_gate.h"
#include "server/observability/health_service.h"
#include "server/regions/region_registry.h"
#include "server/rpc/gemm_stream_reactor.h"
#include "server/rpc/job_intake.h"
#include "server/scheduling/batch_scheduler.h"

namespace gemm::server {

// Every method is raw (grpc::ByteBuffer in and out) and decodes its request
// itself (proto/wire_codec.h): Gemm and GemmStream so that operand and
// result bytes skip the protobuf copies, and all of them so that a request
// that is not a message gets INVALID_ARGUMENT naming the problem, where
// gRPC's own parsing answers a generated method with a bare error. The
// unary methods are generic: gRPC reads a registered unary method's
// message before the service hears of the call. Reflection still describes
// them by the proto: the wire format is the same.
using GemmServiceBase = v1::GemmService::WithGenericMethod_Info<
    v1::GemmService::WithGenericMethod_Gemm<
        v1::GemmService::WithRawCallbackMethod_GemmStream<
            v1::GemmService::WithGenericMethod_RegisterRegion<
                v1::GemmService::WithGenericMethod_UnregisterRegion<
                    v1::GemmService::WithGenericMethod_ListRegions<
                        v1::GemmService::Service>>>>>>;

// What an operator sets of the service (the flags reach these fields
// directly): GemmServer::Options and GemmServiceImpl::Options are both
// settings, so that the server hands them on in one copy.
struct GemmServiceSettings {
  ServiceLimits limits;
  // Shared-memory regions (region_registry.h).
  RegionRegistry::Options regions;
  // Lets gRPC hold a small stream message back (a buffer hint) while more
  // are queued behind it on the same stream, so that several go out in
  // one socket write. A hinted message leaves only when the connection
  // next writes for some other reason, so on a quiet connection it can
  // wait (docs/decisions/0053-coalescing-small-stream-writes-by-default.md).
  // Default false.
  bool coalesce_small_writes = false;
  // Calls a client address may cancel before their requests are read (a
  // stream that sent nothing, a unary call still unread), at once; the
  // allowance refills at a tenth of it a second. A client that spends it
  // (HTTP/2 rapid reset) has its connections closed and new ones refused
  // for shut_out_for (cancel_flood_guard.h; TCP listeners only). Default
  // 1000; 0: no limit.
  uint64_t max_client_early_cancels = 1000;
  // How long a client that spent that allowance stays shut out. Default
  // 10 s.
  absl::Duration shut_out_for = absl::Seconds(10);
};

class GemmServiceImpl final : public GemmServiceBase {
 public:
  struct Options : GemmServiceSettings {
    // Reported by Info.
    std::string version;
    // Unary Gemm messages of one client read at once (unary_read_gate.h);
    // its other calls wait, up to limits.max_client_jobs of them. Default
    // 8.
    size_t max_client_unary_reads = 8;
    // Host storage of new jobs (pinned memory on the CUDA backend); must
    // outlive the service. Default nullptr: the heap.
    HostAllocator* host_allocator = nullptr;
    // Who may call, and who a caller is (call_auth.h); must outlive the
    // service. Default nullptr: anyone, known by its address.
    const CallAuthenticator* authenticator = nullptr;
    // Where jobs and bytes are also counted (server_metrics.h); must
    // outlive the service. Default nullptr: Info's counts only.
    ServerMetrics* metrics = nullptr;
    // Closes a client's connections and refuses its new ones until a time
    // (ConnectionLimiter::ShutOut), returning the connections closed; set
    // by GemmServer where it owns the listener. Default: none (the guard
    // only logs).
    std::function<size_t(const std::string& client, absl::Time until)> shut_out;
    // Claims the connection a call came on (its gRPC peer name) for the
    // caller's identity (ConnectionLimiter::ClaimForIdentity), where
    // callers are known by token or certificate; a call on a connection
    // past the identity's cap fails with its status. Default: none.
    std::function<absl::Status(absl::string_view peer,
                               const std::string& identity)>
        claim_connection;
    // grpc.health.v1, served with the unary calls (unary_calls()); must
    // outlive the service. Default nullptr: not served.
    HealthService* health = nullptr;
  };

  // `executor` and `scheduler` must outlive the service. Starts a thread
  // that expires stalled stream jobs (ServiceLimits::job_stall_timeout).
  GemmServiceImpl(const Options& options, Executor* executor,
                  BatchScheduler* scheduler);
  ~GemmServiceImpl() override;  // after the server has stopped

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GemmStream(
      grpc::CallbackServerContext* context) override;

  // Shutdown, once the scheduler has stopped accepting jobs: every job not
  // yet accepted ends with UNAVAILABLE (streams waiting for room included),
  // streams read no more and end once their accepted jobs have answered.
  // Unary calls already admitted finish as usual; those whose request is
  // not yet read end with UNAVAILABLE.
  void Drain();
  // Serves the unary methods and Options::health's Check and Watch, and
  // answers UNIMPLEMENTED for methods nobody serves; to register with the
  // service.
  grpc::CallbackGenericService* unary_calls() { return &unary_calls_; }
  // Calls still open: streams, and unary Gemm calls.
  size_t open_streams() const { return streams_.open_streams(); }
  size_t open_unary_calls() const { return open_unary_calls_.load(); }
  // Bytes of the jobs in flight (the in-flight budget's use), and its limit.
  uint64_t inflight_bytes() const { return intake_.budget().used(); }
  uint64_t inflight_limit_bytes() const { return intake_.budget().limit(); }
  // The callers' shared-memory regions.
  const RegionRegistry& regions() const { return regions_; }
  // A call of `peer` (grpc::ServerContext::peer()) that began at `began`
  // and that its caller cancelled before its request was read (a stream
  // that sent nothing, a unary call not yet read): counted against the
  // client's allowance, which shuts it out once spent. Not counted: a call
  // cancelled near its `deadline` (within a tenth of its timeout, at least
  // 250 ms: a client giving up on time). A client that cancels many calls
  // that waited for their turn to be read (UnaryReadGate) is counted.
  void NoteEarlyCancel(const std::string& peer,
                       std::chrono::system_clock::time_point began,
                       std::chrono::system_clock::time_point deadline);
  // The full names of the methods whose calls count their own early
  // cancels; an interceptor is to count the others'.
  static std::vector<std::string> MethodsCountingEarlyCancels();
  // Clients shut out so far for cancelling calls before they were read.
  uint64_t clients_shut_out() const { return cancel_flood_.trips(); }

  // Jobs turned away before they were accepted (Info's jobs_rejected).
  uint64_t rejected_jobs() const { return intake_.counts().rejected(); }
  // Unary Gemm calls whose request is being read, and those waiting for
  // their turn (unary_read_gate.h).
  size_t unary_calls_reading() const { return read_gate_.reading(); }
  size_t unary_calls_waiting() const { return read_gate_.waiting(); }

 private:
  class UnaryGemmCall;
  class SmallUnaryCall;
  // Ends a small unary call: `status`, and `response` when it is OK.
  using Answer = std::function<void(const absl::Status& status,
                                    grpc::ByteBuffer response)>;
  // The unary methods other than Gemm; each answers through `answer`, at
  // once or (UnregisterRegion) later, from another thread.
  using Serve =
      void (GemmServiceImpl::*)(const grpc::CallbackServerContext& context,
                                const grpc::ByteBuffer& request, Answer answer);
  void ServeInfo(const grpc::CallbackServerContext& context,
                 const grpc::ByteBuffer& request, Answer answer);
  void ServeRegisterRegion(const grpc::CallbackServerContext& context,
                           const grpc::ByteBuffer& request, Answer answer);
  void ServeUnregisterRegion(const grpc::CallbackServerContext& context,
                             const grpc::ByteBuffer& request, Answer answer);
  void ServeListRegions(const grpc::CallbackServerContext& context,
                        const grpc::ByteBuffer& request, Answer answer);
  class UnaryCalls final : public grpc::CallbackGenericService {
   public:
    explicit UnaryCalls(GemmServiceImpl* service) : service_(service) {}
    grpc::ServerGenericBidiReactor* CreateReactor(
        grpc::GenericCallbackServerContext* context) override;

   private:
    GemmServiceImpl* const service_;
  };

  // Admits the job of a unary call whose request has been read; `call`
  // answers (now, when the job is refused).
  void AdmitUnary(UnaryGemmCall* call);
  // Logs and counts a unary call refused before its job was accepted
  // (`shape` once known, else null).
  void CountRefusedUnary(const std::string& client, const GemmProblem* shape,
                         const absl::Status& status);
  // What Info answers.
  v1::InfoResponse Describe() const;
  // Jobs answered or refused so far: changes while the server works.
  uint64_t Activity() const;
  // The caller's identity, or UNAUTHENTICATED (call_auth.h).
  absl::StatusOr<std::string> Identify(
      const grpc::CallbackServerContext& context) const;

  const Options options_;
  // Read by Info only.
  Executor* const executor_;
  BatchScheduler* const scheduler_;
  // Before the intake, which holds it: outlives every job.
  RegionRegistry regions_;
  JobIntake intake_;
  const GemmStreamReactor::Options stream_options_;
  StreamRegistry streams_;
  std::atomic<size_t> open_unary_calls_{0};
  UnaryReadGate read_gate_;
  CancelFloodGuard cancel_flood_;
  UnaryCalls unary_calls_{this};
  // Expires stalled stream jobs every quarter of the stall timeout (at most
  // 250 ms apart), and idle regions; gives memory back once quiet.
  absl::Notification stop_sweeping_;
  std::thread sweeper_;
  const absl::Time start_time_ = absl::Now();
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_RPC_GEMM_SERVICE_H_
