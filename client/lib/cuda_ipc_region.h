// CudaIpcRegion: device memory of the caller's, exported with
// cudaIpcGetMemHandle for a CUDA server on the same host to use as a region
// (gemm.proto's Region, kind cuda-ipc). Operands already on the GPU are
// named by offset (GemmArgs.a_region ...) and never cross PCIe; results
// land in it. Built where CUDA is (//client/lib:cuda_ipc_region).
//
// The allocation is freed when the CudaIpcRegion is destroyed: unregister
// it first (GemmClient::UnregisterRegion returns once the server has
// closed its handle).
//
// Thread-safety: not thread-safe.
//
//   ASSIGN_OR_RETURN(auto gpu, CudaIpcRegion::Create(bytes, /*device=*/0));
//   RETURN_IF_ERROR(gpu->Upload(0, a.data(), 4 * a.size()));
//   RETURN_IF_ERROR(client->RegisterRegion(gpu->Describe("weights")).status());
#ifndef GEMM_CLIENT_LIB_CUDA_IPC_REGION_H_
#define GEMM_CLIENT_LIB_CUDA_IPC_REGION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/gemm.pb.h"

namespace gemm::client {

class CudaIpcRegion {
 public:
  // `bytes` of device memory on CUDA device `device` (this process's
  // ordinal).
  static absl::StatusOr<std::unique_ptr<CudaIpcRegion>> Create(uint64_t bytes,
                                                               int device);
  CudaIpcRegion(const CudaIpcRegion&) = delete;
  CudaIpcRegion& operator=(const CudaIpcRegion&) = delete;
  ~CudaIpcRegion();  // frees the memory

  // The device memory, for the caller's own kernels.
  void* device_pointer() const { return pointer_; }
  uint64_t size() const { return size_; }
  // "GPU-..." as nvidia-smi prints it.
  const std::string& device_uuid() const { return uuid_; }

  // Copies between host memory and [offset, offset + bytes) of the region.
  absl::Status Upload(uint64_t offset, const void* from, uint64_t bytes);
  absl::Status Download(uint64_t offset, void* to, uint64_t bytes) const;

  // The region as RegisterRegionRequest takes it, with this host's id.
  v1::RegisterRegionRequest Describe(const std::string& name) const;

 private:
  CudaIpcRegion() = default;

  void* pointer_ = nullptr;
  uint64_t size_ = 0;
  int device_ = 0;
  std::string uuid_;
  std::string handle_;
};

}  // namespace gemm::client

#endif  // GEMM_CLIENT_LIB_CUDA_IPC_REGION_H_
