#include "server/cuda/pinned_host_pool.h"

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

// Granule of the arena's ranges: a page, so that blocks are page aligned
// (the copy engines' fastest case) and the range book stays small.
constexpr uint64_t kGranule = 4096;
// The smallest arena worth pinning when the full size cannot be had.
constexpr uint64_t kSmallestArena = uint64_t{64} << 20;

}  // namespace

std::unique_ptr<PinnedHostPool> PinnedHostPool::Create(
    uint64_t arena_bytes, uint64_t max_block_bytes) {
  arena_bytes = arena_bytes / kGranule * kGranule;
  void* arena = nullptr;
  uint64_t bytes = arena_bytes;
  const absl::Time start = absl::Now();
  while (bytes > 0) {
    if (cudaHostAlloc(&arena, bytes, cudaHostAllocPortable) == cudaSuccess) {
      break;
    }
    const cudaError_t error = cudaGetLastError();
    spdlog::warn("pinned host pool: cannot pin {} MiB ({}){}", bytes >> 20,
                 cudaGetErrorString(error),
                 bytes / 2 >= kSmallestArena ? "; trying half" : "");
    arena = nullptr;
    bytes = bytes / 2 >= kSmallestArena ? bytes / 2 / kGranule * kGranule : 0;
  }
  if (arena_bytes > 0) {
    spdlog::info("pinned host pool: {} MiB page-locked in {:.2f} s{}",
                 bytes >> 20, absl::ToDoubleSeconds(absl::Now() - start),
                 bytes == 0 ? "; every job's operands stay pageable" : "");
  }
  return std::unique_ptr<PinnedHostPool>(
      new PinnedHostPool(static_cast<char*>(arena), bytes, max_block_bytes));
}

PinnedHostPool::PinnedHostPool(char* arena, uint64_t arena_bytes,
                               uint64_t max_block_bytes)
    : arena_(arena),
      size_(arena_bytes),
      max_block_bytes_(max_block_bytes),
      ranges_(arena_bytes, kGranule) {}

PinnedHostPool::~PinnedHostPool() {
  if (arena_ != nullptr) cudaFreeHost(arena_);
}

void* PinnedHostPool::Allocate(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  if (max_block_bytes_ == 0 || bytes <= max_block_bytes_) {
    if (std::optional<uint64_t> offset = ranges_.Allocate(bytes)) {
      return arena_ + *offset;
    }
  }
  ++pageable_blocks_;
  return nullptr;
}

void PinnedHostPool::Free(void* block, uint64_t /*bytes*/) {
  const auto at = reinterpret_cast<uintptr_t>(block);
  const auto base = reinterpret_cast<uintptr_t>(arena_);
  absl::MutexLock lock(&mu_);
  if (arena_ == nullptr || at < base || at >= base + size_ ||
      !ranges_.Free(at - base)) {
    spdlog::error("pinned host pool: freed a block it did not hand out");
  }
}

uint64_t PinnedHostPool::in_use() const {
  absl::MutexLock lock(&mu_);
  return ranges_.used();
}

uint64_t PinnedHostPool::pageable_blocks() const {
  absl::MutexLock lock(&mu_);
  return pageable_blocks_;
}

}  // namespace gemm::server
