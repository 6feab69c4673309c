// The benchmark programs' check of a CUDA runtime call (check-bench,
// copy-bench, dispatch-bench): on an error, the program's name, the call
// and CUDA's message on stderr, and exit 1. For programs only: libraries
// return a status (CudaStatus, kernels/sgemm.h).
//
// Thread-safety: as the call checked; exits the whole process.
//
//   CHECK_CUDA(cudaMalloc(&buffer, bytes));
//   // copy-bench: cudaMalloc(&buffer, bytes): out of memory
#ifndef GEMM_KERNELS_EXIT_ON_CUDA_ERROR_H_
#define GEMM_KERNELS_EXIT_ON_CUDA_ERROR_H_

#include <cuda_runtime_api.h>
#include <errno.h>  // program_invocation_short_name (glibc)

#include <cstdio>
#include <cstdlib>

namespace gemm::kernels {

// Exits the program, saying `call` failed, unless `err` is cudaSuccess.
inline void ExitOnCudaError(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, call,
               cudaGetErrorString(err));
  std::exit(1);
}

}  // namespace gemm::kernels

#define CHECK_CUDA(call) ::gemm::kernels::ExitOnCudaError((call), #call)

#endif  // GEMM_KERNELS_EXIT_ON_CUDA_ERROR_H_
