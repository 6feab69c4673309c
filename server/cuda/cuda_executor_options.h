// The options of the CUDA backend, apart from its implementation so that
// GemmServer::Options and main.cc can carry them in builds without CUDA.
//
// Thread-safety: a plain value type.
//
//   CudaExecutorOptions options;
//   options.devices = {0, 1};
//   options.dispatch_cache = "/var/cache/gemm/dispatch.tsv";
#ifndef GEMM_SERVER_CUDA_CUDA_EXECUTOR_OPTIONS_H_
#define GEMM_SERVER_CUDA_CUDA_EXECUTOR_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gemm::server {

struct CudaExecutorOptions {
  // CUDA device ordinals to run on. Default empty: every visible device.
  std::vector<int> devices;
  // CUDA streams per device: batches one device works on at once, so that
  // one batch's copies overlap another's kernel. Default 4.
  int streams_per_device = 4;
  // Device memory each device may hold for operands, in bytes. 0 (the
  // default): 90% of the memory free on the device at start.
  uint64_t device_memory_budget_bytes = 0;
  // Page-locked host memory pinned at start for the jobs' operands and
  // results (pinned_host_pool.h); what does not fit in it stays pageable
  // (slower to copy, about 6 against 55 GB/s). Nothing is pinned after
  // start, since pinning stalls every other job meanwhile. Default 2 GiB;
  // gemm-server caps it at --max-inflight-bytes, which the jobs' host
  // blocks count against. 0: no pinned memory.
  uint64_t pinned_pool_bytes = uint64_t{2} << 30;
  // Largest operand block taken from the pinned pool, so that one job
  // cannot take all of it. Default 512 MiB (an 11585^2 operand); 0: no
  // limit.
  uint64_t max_pinned_block_bytes = uint64_t{512} << 20;
  // How a worker waits for its batch to finish on the GPU. true (the
  // default): it sleeps until the driver wakes it (cudaEventBlockingSync),
  // leaving the host's cores to gRPC; false: it spins on the event, which
  // answers a few microseconds sooner but keeps one core busy per waiting
  // worker (measured equal:
  // docs/decisions/0012-cuda-workers-wait-on-blocking-sync-events.md).
  bool blocking_sync = true;
  // Measure the dispatch table at start. false: "auto" always runs cuBLAS.
  // Default true.
  bool calibrate = true;
  // File the dispatch table is loaded from when it holds one for this GPU,
  // and saved to after a calibration. Default empty: calibrate at every
  // start, keep the table in memory only.
  std::string dispatch_cache;
  // Shapes "auto" measures at the shape itself (shape_tuner.h): the first
  // job of a shape runs the table's choice and queues the shape; a thread
  // times every candidate there on a low-priority stream; later jobs of
  // the shape run the fastest. Past this many shapes, new ones keep the
  // table's choice. 0: no tuning. Needs calibrate. Default 4096.
  size_t max_tuned_shapes = 4096;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CUDA_CUDA_EXECUTOR_OPTIONS_H_
