#include "server/cuda/device_memory_pool.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_format.h"
#include "server/cuda/size_class.h"

namespace gemm::server {

DeviceMemoryPool::~DeviceMemoryPool() {
  absl::MutexLock lock(&mu_);
  for (auto& [size, list] : free_) {
    for (void* block : list) cudaFree(block);
  }
  free_.clear();
}

absl::StatusOr<void*> DeviceMemoryPool::Allocate(uint64_t bytes) {
  const uint64_t size = SizeClass(bytes);
  if (size > budget_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: a batch needs %d bytes of device memory, over the device's "
        "budget of %d",
        label_, size, budget_));
  }
  absl::MutexLock lock(&mu_);
  auto fits = [this, size]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return in_use_ + size <= budget_;
  };
  mu_.Await(absl::Condition(&fits));
  auto it = free_.find(size);
  if (it != free_.end() && !it->second.empty()) {
    void* block = it->second.back();
    it->second.pop_back();
    cached_ -= size;
    in_use_ += size;
    return block;
  }
  // Make room under the budget from cached blocks of other sizes.
  while (in_use_ + cached_ + size > budget_ && cached_ > 0) ReleaseOneCached();
  void* block = nullptr;
  cudaError_t err = cudaMalloc(&block, size);
  if (err != cudaSuccess) {
    cudaGetLastError();  // not sticky; clear it
    while (cached_ > 0) ReleaseOneCached();
    err = cudaMalloc(&block, size);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(
          absl::StrFormat("%s: cudaMalloc of %d bytes failed: %s", label_, size,
                          cudaGetErrorString(err)));
    }
  }
  in_use_ += size;
  return block;
}

void DeviceMemoryPool::Free(void* block, uint64_t bytes) {
  const uint64_t size = SizeClass(bytes);
  absl::MutexLock lock(&mu_);
  free_[size].push_back(block);
  cached_ += size;
  in_use_ -= size;
}

void DeviceMemoryPool::ReleaseOneCached() {
  for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
    if (it->second.empty()) continue;
    cudaFree(it->second.back());
    it->second.pop_back();
    cached_ -= it->first;
    return;
  }
}

uint64_t DeviceMemoryPool::in_use() const {
  absl::MutexLock lock(&mu_);
  return in_use_;
}

uint64_t DeviceMemoryPool::cached() const {
  absl::MutexLock lock(&mu_);
  return cached_;
}

}  // namespace gemm::server
