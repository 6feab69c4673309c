// GemmServer: assembles executor, scheduler and gRPC service into a running
// server, with the health service (health_service.h) and server reflection
// (reflection_service.h), and takes it down gracefully.
//
// Thread-safety: Shutdown() may be called from any thread, once.
//
//   GemmServer::Options options;
//   options.listen_address = "127.0.0.1:0";
//   ASSIGN_OR_RETURN(auto server, GemmServer::Create(options));
//   std::cout << server->port();
//   server->Shutdown(absl::Seconds(30));  // finishes accepted jobs
#ifndef GEMM_SERVER_APP_GEMM_SERVER_H_
#define GEMM_SERVER_APP_GEMM_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "server/admission/validation.h"
#include "server/core/executor.h"
#include "server/cuda/cuda_executor_options.h"
#include "server/edge/call_auth.h"
#include "server/edge/connection_limiter.h"
#include "server/edge/connection_refuser.h"
#include "server/edge/tcp_acceptor.h"
#include "server/observability/health_service.h"
#include "server/observability/metrics_endpoint.h"
#include "server/observability/server_metrics.h"
#include "server/rpc/gemm_service.h"
#include "server/rpc/reflection_service.h"
#include "server/scheduling/batch_scheduler.h"

namespace gemm::server {

class GemmServer {
 public:
  struct Options : GemmServiceSettings {
    // host:port to listen on; port 0 picks a free one (see port()).
    // Default 0.0.0.0:50051.
    std::string listen_address = "0.0.0.0:50051";
    // "auto" (CUDA where this build has it and a GPU is present, else the
    // CPU), "cuda" or "cpu". Default "auto".
    std::string backend = "auto";
    // OpenBLAS threads per GEMM on the CPU backend; 0 = OpenBLAS's default.
    int cpu_threads = 0;
    // The CUDA backend's devices, streams, pools and dispatch table; see
    // cuda_executor_options.h for each default.
    CudaExecutorOptions cuda;
    // batching.num_workers 0 means the backend's choice: 2 on the CPU,
    // devices x streams_per_device on CUDA. With 2 or more on the CPU, one
    // takes only light jobs (CpuExecutor::IsLight); light_workers and light
    // are set here. The other fields keep BatchScheduler::Options's
    // defaults.
    BatchScheduler::Options batching = [] {
      BatchScheduler::Options batching;
      batching.num_workers = 0;
      return batching;
    }();
    // HTTP/2 flow-control window each stream aims for (gRPC's
    // GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES), in bytes: how much a client
    // may send ahead of the server's reads. gRPC's default (64 KiB, grown
    // by BDP probing) throttles large jobs over fast links; the cost is up
    // to this much buffered memory per busy stream. 0 (the default): gRPC's
    // own; 16 MiB measured no faster on the H200 host
    // (docs/reference/performance.md).
    int http2_stream_window_bytes = 0;
    // Whether gRPC grows each connection's HTTP/2 windows to its measured
    // bandwidth-delay product (GRPC_ARG_HTTP2_BDP_PROBE). On, the default,
    // jobs stream at full speed: off, each connection moves about 64 KiB
    // per round trip, and on the H200 host over loopback throughput fell
    // by 40-55% for jobs from 128^3 to 4096^3
    // (docs/decisions/0039-http-2-bdp-probing-off-by-default.md). But on,
    // windows grow to several MiB per connection whether or not the server
    // reads: 32 streams on 4 connections buffered about 600 MB beyond the
    // in-flight budget in tests/load_test.cc, and unary calls waiting for their
    // client's turn (max_client_unary_reads) on 120 connections of one client
    // filled a 256 MiB gRPC quota (docs/how-to/load-testing.md). Off, what a
    // connection may send ahead of the server's reads stays near the window
    // (http2_stream_window_bytes, or gRPC's 64 KiB), and memory near the
    // in-flight budget.
    bool http2_bdp_probe = true;
    // HTTP/2 streams (calls) open at once on one connection
    // (GRPC_ARG_MAX_CONCURRENT_STREAMS); a client wanting more waits for a
    // slot. Bounds what one connection can make the server hold in calls.
    // Default 1024; 0: gRPC's own (no limit).
    int max_concurrent_streams = 1024;
    // Connections open at once, from all clients and from one client; a
    // connection past either is refused as soon as it is accepted, and so
    // is one whose descriptor comes within a quarter of the open-file limit
    // (at most 256 descriptors) of it, so that accepting never runs out of
    // descriptors (connection_limiter.h). A refused client's calls fail
    // with RESOURCE_EXHAUSTED and the reason (connection_refuser.h).
    // A client is its address (client_identity.h); where callers are known
    // by token or client certificate (token_file, tls_client_ca_file), it
    // is that identity, counted at each connection's first call, and one
    // address may hold max_connections_per_address, so that the clients
    // behind one NAT or load balancer do not share one cap.
    // A legitimate load generator on one host opens hundreds of
    // connections (one per stream is a common pattern): 1024 lets it, and
    // a flood from one address still meets the descriptor reserve and
    // max_connections. Unread data per connection is bounded apart: unary
    // requests are read in their client's turn (--max-client-unary-reads)
    // and gRPC's buffers under --grpc-memory-bytes.
    // Defaults 10000, 1024 and 4096; 0: no cap but the descriptor limit's.
    // TLS: the server's certificate chain and private key (PEM files).
    // Both empty (the default): plaintext.
    std::string tls_cert_file;
    std::string tls_key_file;
    // mTLS: clients must present a certificate signed by a CA in this PEM
    // file (needs tls_cert_file). Default empty: no client certificate.
    std::string tls_client_ca_file;
    // Bearer tokens every GemmService call must carry (call_auth.h); the
    // health service and reflection do not ask. Default empty: none.
    std::string token_file;
    size_t max_connections = 10000;
    size_t max_connections_per_client = 1024;
    size_t max_connections_per_address = 4096;
    // gRPC's resource quota, in bytes: what its transport may hold in
    // buffers (a request still arriving, a read ahead of the service) before
    // it reclaims memory: it closes idle connections and cancels streams
    // with RESOURCE_EXHAUSTED ("Buffers full") until it is back under.
    // gRPC 1.51 overcommits and picks the streams it cancels at random, so
    // this is a brake on what the in-flight budget cannot see (partial
    // messages), sized well above normal use. Default 2 GiB; 0: none.
    uint64_t grpc_memory_bytes = uint64_t{2} << 30;
    // Unary Gemm requests of one client read at once; its other unary
    // calls wait unread (up to limits.max_client_jobs of them), each
    // holding at most its stream's window in gRPC's buffers
    // (unary_read_gate.h). 0 (the default): as many as fill a quarter of
    // grpc_memory_bytes with messages of limits.max_message_bytes, at
    // least 1 (8 with the defaults); 8 without a quota.
    size_t max_client_unary_reads = 0;
    // Largest metadata (headers) of a request, in bytes
    // (GRPC_ARG_MAX_METADATA_SIZE). Default 16 KiB; 0: gRPC's own (8 KiB).
    int max_metadata_bytes = 16 << 10;
    // A connection with no call for this long is closed with GOAWAY
    // (GRPC_ARG_MAX_CONNECTION_IDLE_MS), so idle connections do not pile
    // up. Default 5 minutes; zero: never.
    absl::Duration max_connection_idle = absl::Minutes(5);
    // A connection older than this is asked to go away (GOAWAY), its calls
    // given max_connection_age_grace to end (GRPC_ARG_MAX_CONNECTION_AGE_MS
    // and _GRACE_MS); clients reconnect, which also spreads them over new
    // replicas. Default zero: no limit.
    absl::Duration max_connection_age = absl::ZeroDuration();
    absl::Duration max_connection_age_grace = absl::Minutes(1);
    // The server pings a connection that has been quiet this long and
    // closes it when no answer comes within keepalive_timeout
    // (GRPC_ARG_KEEPALIVE_TIME_MS, _TIMEOUT_MS): dead peers free their
    // calls and descriptors. Default 2 minutes and 20 s.
    absl::Duration keepalive_time = absl::Minutes(2);
    absl::Duration keepalive_timeout = absl::Seconds(20);
    // Largest HTTP/2 frame the server accepts (GRPC_ARG_HTTP2_MAX_FRAME_SIZE),
    // in bytes, at most 16 MiB - 1; bigger frames mean fewer per-frame steps
    // for large payloads. 0 (the default): gRPC's own, 16 KiB.
    int http2_max_frame_bytes = 0;
    // Where /metrics is served over HTTP (metrics_endpoint.h): HOST:PORT,
    // IPv4 or "[::]" (taken as 0.0.0.0), port 0 for a free one
    // (metrics_port()). Default empty: no endpoint (the metrics are still
    // kept; gemm-server's --metrics-listen turns it on).
    std::string metrics_listen;
    // Called once, from a scheduler worker, when a failed batch leaves no
    // device able to compute (every GPU hit a sticky error); the server has
    // already turned health NOT_SERVING. gemm-server stops then, finishing
    // what it can, and exits non-zero so that its supervisor restarts it.
    // Default empty: the server keeps running, answering UNAVAILABLE.
    std::function<void(const absl::Status&)> on_fatal;
    // Wraps the backend's executor before the scheduler and the service
    // use it (a test build of the server injects failures this way; see
    // fault_injecting_executor.h). Default empty: the executor as it is.
    ExecutorDecorator decorate_executor;
  };

  static absl::StatusOr<std::unique_ptr<GemmServer>> Create(
      const Options& options);
  ~GemmServer();

  // The port the server listens on.
  int port() const { return port_; }
  // The metrics endpoint's port; 0 when there is none.
  int metrics_port() const;
  // Every metric, as /metrics serves it.
  std::string RenderMetrics() const;
  const Executor& executor() const { return *executor_; }

  // What a shutdown did, for its last log line.
  struct ShutdownReport {
    // Calls still open when the grace period ran out, which gRPC then
    // cancelled.
    size_t cancelled_streams = 0;
    size_t cancelled_unary_calls = 0;
    // Jobs still queued then (dropped unrun, as cancelled).
    size_t cancelled_queued_jobs = 0;
    bool clean() const {
      return cancelled_streams == 0 && cancelled_unary_calls == 0;
    }
    // "every call ended within the grace period" or what was cancelled.
    std::string ToString() const;
  };

  // Takes the server down, within `grace` in all:
  //  1. health turns NOT_SERVING, for every service, and for `drain_delay`
  //     (at most `grace`) everything else is served as before, so that
  //     load balancers polling health see it and stop sending;
  //  2. it stops taking jobs: the listener closes, the streams' jobs not
  //     yet accepted end with UNAVAILABLE, and streams end as soon as their
  //     accepted jobs have answered (an idle one at once);
  //  3. accepted jobs finish and answer; calls still open when `grace` runs
  //     out are cancelled.
  // Returns once every call has ended and the scheduler has stopped. A job
  // that never leaves the executor (a hung device) holds it past `grace`;
  // gemm-server bounds the whole with a watchdog (server_main.cc).
  ShutdownReport Shutdown(absl::Duration grace,
                          absl::Duration drain_delay = absl::ZeroDuration());

 private:
  GemmServer() = default;
  // The gauges read at each scrape, from the parts built by Create().
  void AddGauges(const Options& options);

  // First: everything below counts into it.
  std::unique_ptr<ServerMetrics> metrics_;
  // grpc.health.v1, which the service serves; outlives its calls.
  std::unique_ptr<HealthService> health_;
  std::unique_ptr<Executor> executor_;
  // The executor's pinned pool on CUDA (jobs' host storage); else nullptr.
  HostAllocator* host_allocator_ = nullptr;
  std::unique_ptr<BatchScheduler> scheduler_;
  std::unique_ptr<ConnectionLimiter> connection_limiter_;
  // Tells refused clients why (plaintext listeners); outlives acceptor_.
  std::unique_ptr<ConnectionRefuser> connection_refuser_;
  std::unique_ptr<CallAuthenticator> authenticator_;
  std::unique_ptr<GemmServiceImpl> service_;
  std::unique_ptr<ReflectionService> reflection_;
  std::unique_ptr<grpc::Server> server_;
  // The TCP listener (absent for a unix: address); after server_, so that
  // it stops handing connections over before the server goes.
  std::unique_ptr<TcpAcceptor> acceptor_;
  int port_ = 0;
  bool shut_down_ = false;
  // Last: it stops serving (its scrapes read the parts above) before
  // anything else goes.
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_APP_GEMM_SERVER_H_
