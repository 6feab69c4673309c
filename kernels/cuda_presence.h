// Whether this machine has a CUDA GPU for the GPU test suites to run on.
//
// A suite skips only where there is no GPU at all: no NVIDIA driver
// (libcuda.so.1 cannot be loaded) or a driver that reports no device. Any
// other CUDA error (a driver too old for this CUDA, a device that fails to
// initialize) is an error the suite must report as a failure, so that a
// broken GPU host never shows up as PASSED.
//
// Thread-safety: ProbeCuda() may be called from any thread.
//
//   const CudaPresence gpu = ProbeCuda();
//   if (!gpu.error.ok()) FAIL() << gpu.error;
//   if (!gpu.present) GTEST_SKIP() << gpu.absent_reason;
#ifndef GEMM_KERNELS_CUDA_PRESENCE_H_
#define GEMM_KERNELS_CUDA_PRESENCE_H_

#include <string>

#include "absl/status/status.h"

namespace gemm::kernels {

struct CudaPresence {
  // At least one CUDA device is usable.
  bool present = false;
  // Why there is no GPU, when !present and error is OK.
  std::string absent_reason;
  // A GPU stack is there but does not work; not OK means "fail, don't skip".
  absl::Status error;
};

CudaPresence ProbeCuda();

}  // namespace gemm::kernels

#endif  // GEMM_KERNELS_CUDA_PRESENCE_H_
