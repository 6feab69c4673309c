// PinnedHostPool: the jobs' page-locked host blocks, carved from one arena
// that is pinned (cudaHostAlloc) once, when the pool is made. The CUDA
// backend hands it to the service as the jobs' HostAllocator, so request
// bytes are copied once, into memory the GPU's copy engines read directly.
//
// Why one arena pinned at start: pinning or unpinning memory holds the CUDA
// driver, and with it every other job's copies and launches, for as long
// as the pages take (about 0.35 ms per MiB on the H200 host). A pool that
// pinned blocks on demand let one client's burst of large jobs stall
// everyone else's for most of a second
// (docs/decisions/0041-the-pinned-host-pool-as-one-arena-pinned-at.md). Here
// nothing is pinned or unpinned while the server serves: a block the arena
// has no room for (or one larger than `max_block_bytes`) is refused, and
// the job uses pageable memory, which is slower to copy but stalls nobody.
//
// Thread-safety: thread-safe.
//
//   auto pool = PinnedHostPool::Create(uint64_t{2} << 30, 512 << 20);
//   void* block = pool->Allocate(bytes);  // nullptr: use the heap
//   pool->Free(block, bytes);
#ifndef GEMM_SERVER_CUDA_PINNED_HOST_POOL_H_
#define GEMM_SERVER_CUDA_PINNED_HOST_POOL_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/core/gemm_job.h"
#include "server/cuda/arena_ranges.h"

namespace gemm::server {

class PinnedHostPool final : public HostAllocator {
 public:
  // Pins an arena of `arena_bytes` (0: none; every Allocate answers
  // nullptr). When the driver cannot pin that much, the pool tries half as
  // much, down to 64 MiB, and logs a warning with what it got. Blocks
  // larger than `max_block_bytes` (0: no limit) are refused, so that one
  // job cannot take the whole arena.
  static std::unique_ptr<PinnedHostPool> Create(uint64_t arena_bytes,
                                                uint64_t max_block_bytes);
  ~PinnedHostPool() override;

  // A block of at least `bytes` from the arena, 4 KiB aligned; nullptr
  // when it is larger than the cap or the arena has no free range that
  // large (counted in pageable_blocks()).
  void* Allocate(uint64_t bytes) override;
  void Free(void* block, uint64_t bytes) override;

  // Bytes of the arena: pinned in all, and held by jobs now.
  uint64_t size() const { return size_; }
  uint64_t in_use() const;
  // Allocations refused so far (those jobs' operands stayed pageable).
  uint64_t pageable_blocks() const;

 private:
  PinnedHostPool(char* arena, uint64_t arena_bytes, uint64_t max_block_bytes);

  char* const arena_;
  const uint64_t size_;
  const uint64_t max_block_bytes_;
  mutable absl::Mutex mu_;
  ArenaRanges ranges_ ABSL_GUARDED_BY(mu_);
  uint64_t pageable_blocks_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CUDA_PINNED_HOST_POOL_H_
