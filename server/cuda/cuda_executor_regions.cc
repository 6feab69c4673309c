// CudaExecutor's part in shared-memory regions (region_registry.h).
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/gpu_uuid.h"
#include "common/status_macros.h"
#include "server/cuda/cuda_executor.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

using kernels::CudaStatus;

// The size of the allocation that `pointer` starts, from the driver
// (cuMemGetAddressRange, reached through the runtime, so that the server
// links no libcuda); 0 when it cannot be had.
uint64_t AllocationBytesFrom(void* pointer) {
  using AddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  static AddressRange address_range = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000,
                                         cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<AddressRange>(nullptr);
    }
    return reinterpret_cast<AddressRange>(fn);
  }();
  if (address_range == nullptr) return 0;
  CUdeviceptr base = 0;
  size_t size = 0;
  const auto at = reinterpret_cast<CUdeviceptr>(pointer);
  if (address_range(&base, &size, at) != CUDA_SUCCESS) return 0;
  return base + size - at;
}

}  // namespace

std::string CudaExecutor::DeviceUuid(int ordinal) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return FormatGpuUuid(reinterpret_cast<const unsigned char*>(prop.uuid.bytes));
}

absl::StatusOr<bool> CudaExecutor::PinHostRegion(void* base, uint64_t bytes,
                                                 bool read_only) {
  RETURN_IF_ERROR(
      CudaStatus(cudaSetDevice(devices_.front()->ordinal()), "cudaSetDevice"));
  unsigned int flags = cudaHostRegisterPortable;
  if (read_only) flags |= cudaHostRegisterReadOnly;
  const cudaError_t err = cudaHostRegister(base, bytes, flags);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat(
        "system: the server cannot register the region's ", bytes,
        " bytes with the CUDA driver (cudaHostRegister: ",
        cudaGetErrorString(err),
        "); the server's locked-memory limit (ulimit -l) may be too low"));
  }
  return true;
}

void CudaExecutor::UnpinHostRegion(void* base) {
  if (cudaHostUnregister(base) != cudaSuccess) cudaGetLastError();
}

absl::StatusOr<IpcMemory> CudaExecutor::OpenIpcRegion(
    absl::string_view handle, absl::string_view device_uuid, uint64_t bytes) {
  const CudaDevice* device = nullptr;
  for (const auto& d : devices_) {
    if (DeviceUuid(d->ordinal()) == device_uuid) device = d.get();
  }
  if (device == nullptr) {
    std::string known;
    for (const auto& d : devices_) {
      absl::StrAppend(&known, known.empty() ? "" : ", ",
                      DeviceUuid(d->ordinal()));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("cuda_ipc.device_uuid: '", device_uuid.substr(0, 64),
                     "' is not a device this server runs on (", known, ")"));
  }
  if (!device->failure().empty()) {
    return absl::UnavailableError(
        absl::StrCat("cuda_ipc.device_uuid: ", device->label(),
                     " is out of service (", device->failure(), ")"));
  }
  RETURN_IF_ERROR(
      CudaStatus(cudaSetDevice(device->ordinal()), "cudaSetDevice"));
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.data(), sizeof(h));
  void* pointer = nullptr;
  const cudaError_t err =
      cudaIpcOpenMemHandle(&pointer, h, cudaIpcMemLazyEnablePeerAccess);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda_ipc.handle: the server cannot open it on ", device->label(),
        " (cudaIpcOpenMemHandle: ", cudaGetErrorString(err),
        "); a handle is opened by another process than the one that "
        "exported it, on the same host, while that allocation lives"));
  }
  IpcMemory memory;
  memory.pointer = pointer;
  memory.ordinal = device->ordinal();
  memory.device_id = absl::StrCat("cuda:", device->ordinal());
  // A size past the allocation would fault on the device, for everyone:
  // a region whose allocation cannot be measured is refused.
  const uint64_t available = AllocationBytesFrom(pointer);
  if (available == 0) {
    CloseIpcRegion(memory);
    return absl::InternalError(
        "cuda_ipc: the server cannot find the exported allocation's size "
        "(cuMemGetAddressRange), so it cannot bound the region");
  }
  if (available < bytes) {
    CloseIpcRegion(memory);
    return absl::InvalidArgumentError(absl::StrFormat(
        "cuda_ipc.byte_size: %d bytes, but the exported allocation has %d",
        bytes, available));
  }
  return memory;
}

void CudaExecutor::CloseIpcRegion(const IpcMemory& memory) {
  cudaSetDevice(memory.ordinal);
  if (cudaIpcCloseMemHandle(memory.pointer) != cudaSuccess) {
    cudaGetLastError();
  }
}

}  // namespace gemm::server
