// PinnedHostPool: page-locked host blocks (cudaHostAlloc), cached by size
// class for reuse. The CUDA backend hands it to the service as the jobs'
// HostAllocator, so request bytes are copied once, into memory the GPU's
// copy engines read directly. When pinning fails it returns nullptr and
// the job falls back to pageable memory.
//
// Thread-safety: thread-safe.
//
//   PinnedHostPool pool(/*cache_limit=*/uint64_t{4} << 30);
//   void* block = pool.Allocate(bytes);  // nullptr: use the heap
//   pool.Free(block, bytes);             // cached while under the limit
#ifndef GEMM_SERVER_PINNED_HOST_POOL_H_
#define GEMM_SERVER_PINNED_HOST_POOL_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/gemm_job.h"

namespace gemm::server {

class PinnedHostPool final : public HostAllocator {
 public:
  // Keeps at most `cache_limit` bytes of freed blocks for reuse. A block
  // larger than `max_block_bytes` (0: no limit) is not pinned at all
  // (Allocate returns nullptr): pinning and unpinning one holds the CUDA
  // driver, and so every other job's copies and launches, for as long as
  // the pages take (about 0.7 s for 2 GiB on the H200 host).
  explicit PinnedHostPool(uint64_t cache_limit, uint64_t max_block_bytes = 0)
      : cache_limit_(cache_limit), max_block_bytes_(max_block_bytes) {}
  ~PinnedHostPool() override { Trim(); }

  void* Allocate(uint64_t bytes) override;
  void Free(void* block, uint64_t bytes) override;
  // Returns every cached block to the driver.
  void Trim();

  // Bytes of pinned blocks held by jobs now, and cached for reuse.
  uint64_t in_use() const;
  uint64_t cached() const;
  uint64_t cache_limit() const { return cache_limit_; }

 private:
  const uint64_t cache_limit_;
  const uint64_t max_block_bytes_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, std::vector<void*>> free_ ABSL_GUARDED_BY(mu_);
  uint64_t cached_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_PINNED_HOST_POOL_H_
