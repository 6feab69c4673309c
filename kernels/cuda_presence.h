// ProbeCudaDevices: whether a GPU test suite has a device to run on, with
// the one rule every GPU suite follows: skip only when the host has no CUDA
// device; any other CUDA error fails, so that a host whose driver is
// broken or too old never reports the suites as passed.
//
// "No device" means: cudaGetDeviceCount answers cudaErrorNoDevice or a
// count of 0 (CUDA_VISIBLE_DEVICES empty, say), or there is no driver at
// all (libcuda.so.1 cannot be loaded; the runtime then says
// cudaErrorInsufficientDriver, which with a driver present means too old).
//
// Thread-safety: thread-safe.
//
//   absl::StatusOr<CudaPresence> gpu = ProbeCudaDevices();
//   ASSERT_TRUE(gpu.ok()) << gpu.status();  // broken CUDA: the test fails
//   if (!gpu->present) GTEST_SKIP() << gpu->why_absent;
#ifndef GEMM_KERNELS_CUDA_PRESENCE_H_
#define GEMM_KERNELS_CUDA_PRESENCE_H_

#include <string>

#include "absl/status/statusor.h"

namespace gemm::kernels {

struct CudaPresence {
  bool present = false;
  int device_count = 0;
  // Why there is no device, when there is none.
  std::string why_absent;
};

// INTERNAL (with the CUDA error) for anything but a device or no device.
absl::StatusOr<CudaPresence> ProbeCudaDevices();

}  // namespace gemm::kernels

#endif  // GEMM_KERNELS_CUDA_PRESENCE_H_
