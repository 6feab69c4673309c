#include "client/lib/cuda_ipc_region.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/lib/shm_region.h"
#include "common/gpu_uuid.h"
#include "common/host_id.h"

namespace gemm::client {
namespace {

absl::Status Cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaIpcRegion>> CudaIpcRegion::Create(
    uint64_t bytes, int device) {
  std::unique_ptr<CudaIpcRegion> region(new CudaIpcRegion());
  region->size_ = bytes;
  region->device_ = device;
  absl::Status s = Cuda(cudaSetDevice(device), "cudaSetDevice");
  if (!s.ok()) return s;
  s = Cuda(cudaMalloc(&region->pointer_, bytes), "cudaMalloc");
  if (!s.ok()) return s;
  cudaIpcMemHandle_t handle;
  s = Cuda(cudaIpcGetMemHandle(&handle, region->pointer_),
           "cudaIpcGetMemHandle");
  if (!s.ok()) return s;
  region->handle_.assign(reinterpret_cast<const char*>(&handle),
                         sizeof(handle));
  cudaDeviceProp prop;
  s = Cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  if (!s.ok()) return s;
  region->uuid_ =
      FormatGpuUuid(reinterpret_cast<const unsigned char*>(prop.uuid.bytes));
  return region;
}

CudaIpcRegion::~CudaIpcRegion() {
  if (pointer_ == nullptr) return;
  cudaSetDevice(device_);
  cudaFree(pointer_);
}

absl::Status CudaIpcRegion::Upload(uint64_t offset, const void* from,
                                   uint64_t bytes) {
  if (offset > size_ || bytes > size_ - offset) {
    return absl::OutOfRangeError("Upload past the region's end");
  }
  return Cuda(cudaMemcpy(static_cast<char*>(pointer_) + offset, from, bytes,
                         cudaMemcpyHostToDevice),
              "cudaMemcpy");
}

absl::Status CudaIpcRegion::Download(uint64_t offset, void* to,
                                     uint64_t bytes) const {
  if (offset > size_ || bytes > size_ - offset) {
    return absl::OutOfRangeError("Download past the region's end");
  }
  return Cuda(cudaMemcpy(to, static_cast<const char*>(pointer_) + offset, bytes,
                         cudaMemcpyDeviceToHost),
              "cudaMemcpy");
}

v1::RegisterRegionRequest CudaIpcRegion::Describe(
    const std::string& name) const {
  v1::RegisterRegionRequest request;
  request.set_name(name);
  request.set_host_id(ReadHostId());
  v1::CudaIpcMemory* ipc = request.mutable_cuda_ipc();
  ipc->set_handle(handle_);
  ipc->set_device_uuid(uuid_);
  ipc->set_byte_size(size_);
  return request;
}

}  // namespace gemm::client
