#include "kernels/cuda_presence.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace gemm::kernels {
namespace {

bool DriverLibraryLoads() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return false;
  dlclose(handle);
  return true;
}

}  // namespace

absl::StatusOr<CudaPresence> ProbeCudaDevices() {
  CudaPresence presence;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess && count > 0) {
    presence.present = true;
    presence.device_count = count;
    return presence;
  }
  if (err == cudaSuccess) {
    presence.why_absent = "no GPU: no CUDA device is visible";
    return presence;
  }
  cudaGetLastError();
  const std::string what =
      absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorName(err), ": ",
                   cudaGetErrorString(err));
  if (err == cudaErrorNoDevice) {
    presence.why_absent = absl::StrCat("no GPU: ", what);
    return presence;
  }
  if (err == cudaErrorInsufficientDriver && !DriverLibraryLoads()) {
    presence.why_absent = absl::StrCat(
        "no GPU: no CUDA driver installed (libcuda.so.1 not "
        "found; ",
        what, ")");
    return presence;
  }
  return absl::InternalError(absl::StrCat(
      what,
      " (a CUDA driver is present but unusable: the GPU suites fail "
      "rather than skip)"));
}

}  // namespace gemm::kernels
