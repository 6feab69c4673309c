#include "kernels/cuda_presence.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace gemm::kernels {

CudaPresence ProbeCuda() {
  CudaPresence result;
  // Without the driver library, cudart reports "driver version is
  // insufficient", the same error as a driver that is too old: tell the two
  // apart by looking for the driver first.
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver == nullptr) {
    const char* why = dlerror();
    result.absent_reason =
        absl::StrCat("no NVIDIA driver (", why != nullptr ? why : "", ")");
    return result;
  }
  dlclose(driver);
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0)) {
    result.absent_reason = "the NVIDIA driver reports no CUDA device";
    return result;
  }
  if (err != cudaSuccess) {
    result.error = absl::InternalError(
        absl::StrCat("a CUDA driver is installed but cudaGetDeviceCount "
                     "failed: ",
                     cudaGetErrorName(err), ": ", cudaGetErrorString(err)));
    return result;
  }
  result.present = true;
  return result;
}

}  // namespace gemm::kernels
