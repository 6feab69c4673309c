// GemmServer: assembles executor, scheduler and gRPC service into a running
// server, with gRPC's health service and server reflection
// (reflection_service.h), and takes it down gracefully.
//
// Thread-safety: Shutdown() may be called from any thread, once.
//
//   GemmServer::Options options;
//   options.listen_address = "127.0.0.1:0";
//   ASSIGN_OR_RETURN(auto server, GemmServer::Create(options));
//   std::cout << server->port();
//   server->Shutdown(absl::Seconds(30));  // finishes accepted jobs
#ifndef GEMM_SERVER_GEMM_SERVER_H_
#define GEMM_SERVER_GEMM_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "server/batch_scheduler.h"
#include "server/cuda_executor_options.h"
#include "server/executor.h"
#include "server/gemm_service.h"
#include "server/reflection_service.h"
#include "server/validation.h"

namespace gemm::server {

class GemmServer {
 public:
  struct Options {
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
    ServiceLimits limits;
    // batching.num_workers 0 means the backend's choice: 1 on the CPU,
    // devices x streams_per_device on CUDA. The other fields keep
    // BatchScheduler::Options's defaults.
    BatchScheduler::Options batching;
    // HTTP/2 flow-control window each stream aims for (gRPC's
    // GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES), in bytes: how much a client
    // may send ahead of the server's reads. gRPC's default (64 KiB, grown
    // by BDP probing) throttles large jobs over fast links; the cost is up
    // to this much buffered memory per busy stream. 0 (the default): gRPC's
    // own; 16 MiB measured no faster on the H200 host (docs/performance.md).
    int http2_stream_window_bytes = 0;
    // Largest HTTP/2 frame the server accepts (GRPC_ARG_HTTP2_MAX_FRAME_SIZE),
    // in bytes, at most 16 MiB - 1; bigger frames mean fewer per-frame steps
    // for large payloads. 0 (the default): gRPC's own, 16 KiB.
    int http2_max_frame_bytes = 0;
    // Lets gRPC hold a small stream message back (a buffer hint) while more
    // are queued behind it on the same stream, so that several go out in
    // one socket write. Default false.
    bool coalesce_small_writes = false;
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
  const Executor& executor() const { return *executor_; }

  // Stops taking jobs (health turns NOT_SERVING, new jobs get UNAVAILABLE),
  // finishes every accepted job, then closes the server. Calls still open
  // after `grace` are cancelled.
  void Shutdown(absl::Duration grace);

 private:
  GemmServer() = default;

  std::unique_ptr<Executor> executor_;
  // The executor's pinned pool on CUDA (jobs' host storage); else nullptr.
  HostAllocator* host_allocator_ = nullptr;
  std::unique_ptr<BatchScheduler> scheduler_;
  std::unique_ptr<GemmServiceImpl> service_;
  std::unique_ptr<ReflectionService> reflection_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_GEMM_SERVER_H_
