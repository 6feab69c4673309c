#include "server/cuda/cuda_device.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/sgemm.h"

namespace gemm::server {

using kernels::CudaStatus;

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(
    int ordinal, const CudaExecutorOptions& options) {
  std::unique_ptr<CudaDevice> device(new CudaDevice(ordinal));
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ordinal), "cudaSetDevice"));
  cudaDeviceProp prop;
  RETURN_IF_ERROR(CudaStatus(cudaGetDeviceProperties(&prop, ordinal),
                             "cudaGetDeviceProperties"));
  device->name_ = prop.name;
  device->label_ = absl::StrCat("cuda:", ordinal, " ", prop.name);
  device->memory_bytes_ = prop.totalGlobalMem;
  device->compute_capability_ = absl::StrCat(prop.major, ".", prop.minor);
  size_t free_bytes = 0, total_bytes = 0;
  RETURN_IF_ERROR(
      CudaStatus(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  device->pool_ = std::make_unique<DeviceMemoryPool>(
      device->label_, options.device_memory_budget_bytes > 0
                          ? options.device_memory_budget_bytes
                          : free_bytes / 10 * 9);
  device->streams_.resize(options.streams_per_device);
  for (Stream& s : device->streams_) {
    RETURN_IF_ERROR(
        CudaStatus(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking),
                   "cudaStreamCreate"));
    RETURN_IF_ERROR(
        CudaStatus(cudaStreamCreateWithFlags(&s.side, cudaStreamNonBlocking),
                   "cudaStreamCreate"));
    // The batch's last event is the one its worker waits on.
    for (cudaEvent_t& e : s.events) {
      RETURN_IF_ERROR(
          CudaStatus(cudaEventCreateWithFlags(&e, options.blocking_sync
                                                      ? cudaEventBlockingSync
                                                      : cudaEventDefault),
                     "cudaEventCreate"));
    }
  }
  return device;
}

CudaDevice::~CudaDevice() {
  cudaSetDevice(ordinal_);
  for (Stream& s : streams_) {
    if (s.stream != nullptr) cudaStreamSynchronize(s.stream);
    if (s.side != nullptr) cudaStreamSynchronize(s.side);
    for (cudaEvent_t e : s.events) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    if (s.stream != nullptr) cudaStreamDestroy(s.stream);
    if (s.side != nullptr) cudaStreamDestroy(s.side);
  }
  // pool_ goes next, with this device still current.
}

void CudaDevice::MarkFailed(std::string why) {
  absl::MutexLock lock(&failure_mu_);
  if (failure_.empty()) failure_ = std::move(why);
}

std::string CudaDevice::failure() const {
  absl::MutexLock lock(&failure_mu_);
  return failure_;
}

// CUDA errors that leave the device's context unusable: every later call
// on it fails with the same error (CUDA's "sticky" errors), or the device
// is gone.
bool IsStickyCudaError(cudaError_t error) {
  switch (error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorAssert:
    case cudaErrorContextIsDestroyed:
    case cudaErrorExternalDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoDevice:
    // What a GPU that fell off the bus answers.
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

}  // namespace gemm::server
