// DeviceMemoryPool: one GPU's operand memory, cached by size class under a
// byte budget. Allocate() waits while other batches hold the budget, makes
// room by returning cached blocks of other sizes, and answers
// RESOURCE_EXHAUSTED (never a crash) when the driver has nothing to give.
// Nothing on the hot path calls cudaMalloc once blocks of the sizes in use
// are cached.
//
// Thread-safety: thread-safe. Allocate() must be called with the pool's
// device current.
//
//   DeviceMemoryPool pool("cuda:0 NVIDIA H200", budget_bytes);
//   ASSIGN_OR_RETURN(void* block, pool.Allocate(bytes));
//   pool.Free(block, bytes);  // cached for the next batch
#ifndef GEMM_SERVER_CUDA_DEVICE_MEMORY_POOL_H_
#define GEMM_SERVER_CUDA_DEVICE_MEMORY_POOL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace gemm::server {

class DeviceMemoryPool {
 public:
  // `label` names the device in errors; `budget` is in bytes.
  DeviceMemoryPool(std::string label, uint64_t budget)
      : label_(std::move(label)), budget_(budget) {}
  DeviceMemoryPool(const DeviceMemoryPool&) = delete;
  DeviceMemoryPool& operator=(const DeviceMemoryPool&) = delete;
  // Frees the cached blocks (with the pool's device current).
  ~DeviceMemoryPool();

  // A block of at least `bytes`, waiting while other batches hold the
  // budget. RESOURCE_EXHAUSTED when it is larger than the budget or the
  // driver cannot supply it.
  absl::StatusOr<void*> Allocate(uint64_t bytes);
  // Returns a block from Allocate(`bytes`) to the cache.
  void Free(void* block, uint64_t bytes);

  uint64_t budget() const { return budget_; }
  // Bytes handed out now, and cached for reuse.
  uint64_t in_use() const;
  uint64_t cached() const;

 private:
  // Gives the largest cached block back to the driver.
  void ReleaseOneCached() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string label_;
  const uint64_t budget_;
  mutable absl::Mutex mu_;
  uint64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t cached_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, std::vector<void*>> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CUDA_DEVICE_MEMORY_POOL_H_
