// PinnedHostPool: page-locked host blocks (cudaHostAlloc), cached by size
// class for reuse. The CUDA backend hands it to the service as the jobs'
// HostAllocator, so request bytes are copied once, into memory the GPU's
// copy engines read directly. When pinning fails it returns nullptr and
// the job falls back to pageable memory.
//
// Thread-safety: thread-safe.
//
//   PinnedHostPool pool(/*cache_limit=*/uint64_t{4} << 30);  // no total limit
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
  // the pages take (about 0.7 s for 2 GiB on the H200 host). `total_limit`
  // (0: none) bounds the pinned bytes held at once, in use and cached
  // together: a freed block is cached only while the total stays under it,
  // and a new block first releases cached ones of other sizes to stay
  // under it. Blocks in use are not refused: their bytes are the jobs',
  // bounded by the service's in-flight budget, which gemm-server passes
  // here, so that the cache does not add to what the budget allows. The
  // bound is approximate: blocks are size classes, up to a quarter larger
  // than the bytes the budget counts.
  explicit PinnedHostPool(uint64_t cache_limit, uint64_t max_block_bytes = 0,
                          uint64_t total_limit = 0)
      : cache_limit_(cache_limit),
        max_block_bytes_(max_block_bytes),
        total_limit_(total_limit) {}
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
  // Removes cached blocks, largest size first, until in_use_ + cached_ +
  // `incoming` fits under total_limit_ (none when in_use_ + `incoming`
  // alone does not fit); returns them for freeing outside the lock.
  std::vector<void*> EvictForTotalLimit(uint64_t incoming)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t cache_limit_;
  const uint64_t max_block_bytes_;
  const uint64_t total_limit_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, std::vector<void*>> free_ ABSL_GUARDED_BY(mu_);
  uint64_t cached_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_PINNED_HOST_POOL_H_
