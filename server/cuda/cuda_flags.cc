#include "server/cuda/cuda_flags.h"

#include <string>

namespace gemm::server {

void AddCudaFlags(CLI::App& app, CudaExecutorOptions* options) {
  const std::string group = "CUDA backend";
  app.add_option("--devices", options->devices,
                 "CUDA devices to use, e.g. 0,1 (default: all visible)")
      ->delimiter(',')
      ->group(group);
  app.add_option("--streams-per-device", options->streams_per_device,
                 "CUDA streams per device: batches in flight on each GPU")
      ->capture_default_str()
      ->group(group);
  app.add_option("--cuda-blocking-sync", options->blocking_sync,
                 "CUDA workers sleep until their batch is done (false: they "
                 "spin, a core each)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--device-memory-budget-bytes",
                 options->device_memory_budget_bytes,
                 "device memory per GPU for operands (0: 90% of the free "
                 "memory at start); larger jobs get RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->group(group);
  app.add_option("--pinned-pool-bytes", options->pinned_pool_bytes,
                 "page-locked host memory pinned at start for jobs' operands "
                 "(at most --max-inflight-bytes; 0: none); what does not fit "
                 "stays pageable")
      ->capture_default_str()
      ->group(group);
  app.add_option("--max-pinned-block-bytes", options->max_pinned_block_bytes,
                 "largest operand block taken from the pinned pool; larger "
                 "ones stay pageable (0: no limit)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--calibrate", options->calibrate,
                 "time every candidate kernel on a grid of shapes at start, "
                 "for kernel=auto (false: auto runs cuBLAS)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--dispatch-cache", options->dispatch_cache,
                 "file the dispatch table is loaded from if it holds one for "
                 "this GPU, else saved to after calibrating")
      ->group(group);
  app.add_option("--max-tuned-shapes", options->max_tuned_shapes,
                 "shapes kernel=auto measures at the shape itself, off the "
                 "request path, after its first job of the shape (every "
                 "kernel from v6 on, split-K included, and cuBLAS); later jobs "
                 "of a measured shape run its fastest kernel (0: the "
                 "calibrated table's choice only)")
      ->capture_default_str()
      ->group(group);
}

}  // namespace gemm::server
