#include "server/pinned_host_pool.h"

#include <cuda_runtime_api.h>

#include "server/size_class.h"
#include "spdlog/spdlog.h"

namespace gemm::server {

void* PinnedHostPool::Allocate(uint64_t bytes) {
  const uint64_t size = SizeClass(bytes);
  if (max_block_bytes_ > 0 && size > max_block_bytes_) return nullptr;
  std::vector<void*> evicted;
  {
    absl::MutexLock lock(&mu_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      cached_ -= size;
      in_use_ += size;
      return block;
    }
    evicted = EvictForTotalLimit(size);
    // Counted before the allocation, so that concurrent allocations and
    // frees see it when they check the total limit.
    in_use_ += size;
  }
  for (void* old : evicted) cudaFreeHost(old);
  void* block = nullptr;
  if (cudaHostAlloc(&block, size, cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();
    Trim();
    if (cudaHostAlloc(&block, size, cudaHostAllocPortable) != cudaSuccess) {
      cudaGetLastError();
      spdlog::warn(
          "pinned pool: cudaHostAlloc of {} bytes failed; the job "
          "uses pageable memory",
          size);
      absl::MutexLock lock(&mu_);
      in_use_ -= size;
      return nullptr;
    }
  }
  return block;
}

void PinnedHostPool::Free(void* block, uint64_t bytes) {
  const uint64_t size = SizeClass(bytes);
  {
    absl::MutexLock lock(&mu_);
    in_use_ -= size;
    const bool under_total =
        total_limit_ == 0 || in_use_ + cached_ + size <= total_limit_;
    if (cached_ + size <= cache_limit_ && under_total) {
      free_[size].push_back(block);
      cached_ += size;
      return;
    }
  }
  cudaFreeHost(block);
}

std::vector<void*> PinnedHostPool::EvictForTotalLimit(uint64_t incoming) {
  std::vector<void*> evicted;
  // Blocks in use alone past the limit: evicting cannot bring the total
  // under it, and would only stall the driver at the busiest moment.
  if (total_limit_ == 0 || in_use_ + incoming > total_limit_) return evicted;
  for (auto it = free_.rbegin();
       it != free_.rend() && in_use_ + cached_ + incoming > total_limit_;
       ++it) {
    while (!it->second.empty() && in_use_ + cached_ + incoming > total_limit_) {
      evicted.push_back(it->second.back());
      it->second.pop_back();
      cached_ -= it->first;
    }
  }
  return evicted;
}

uint64_t PinnedHostPool::in_use() const {
  absl::MutexLock lock(&mu_);
  return in_use_;
}

uint64_t PinnedHostPool::cached() const {
  absl::MutexLock lock(&mu_);
  return cached_;
}

void PinnedHostPool::Trim() {
  std::vector<void*> blocks;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [size, list] : free_) {
      blocks.insert(blocks.end(), list.begin(), list.end());
    }
    free_.clear();
    cached_ = 0;
  }
  for (void* block : blocks) cudaFreeHost(block);
}

}  // namespace gemm::server
