// The flags of the CUDA backend (--devices, --streams-per-device, pools,
// calibration), bound to a CudaExecutorOptions whose values are their
// defaults. They exist in every build: a build without CUDA ignores them.
//
// Thread-safety: call while building the command line, on one thread.
//
//   CudaExecutorOptions cuda;
//   AddCudaFlags(app, &cuda);  // before app.parse()
#ifndef GEMM_SERVER_CUDA_CUDA_FLAGS_H_
#define GEMM_SERVER_CUDA_CUDA_FLAGS_H_

#include "CLI/CLI.hpp"
#include "server/cuda/cuda_executor_options.h"

namespace gemm::server {

// `options` must outlive the parse.
void AddCudaFlags(CLI::App& app, CudaExecutorOptions* options);

}  // namespace gemm::server

#endif  // GEMM_SERVER_CUDA_CUDA_FLAGS_H_
