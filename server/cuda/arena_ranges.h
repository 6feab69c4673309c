// ArenaRanges: hands out ranges of one fixed arena (offsets into it), best
// fit, and merges a freed range with its free neighbours. PinnedHostPool
// carves the jobs' blocks from one page-locked arena with it, so that no
// block is pinned, or unpinned, while the server serves.
//
// Ranges are multiples of `granule` bytes and start at multiples of it.
// Best fit (the smallest free range that holds the request, the lowest
// offset among equals) keeps large ranges whole for large requests.
//
// Thread-safety: none; the owner locks.
//
//   ArenaRanges ranges(/*size=*/1 << 30, /*granule=*/4096);
//   std::optional<uint64_t> offset = ranges.Allocate(bytes);  // nullopt: full
//   ranges.Free(*offset);
#ifndef GEMM_SERVER_CUDA_ARENA_RANGES_H_
#define GEMM_SERVER_CUDA_ARENA_RANGES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace gemm::server {

class ArenaRanges {
 public:
  // An arena of `size` bytes (rounded down to a multiple of `granule`, a
  // power of two).
  ArenaRanges(uint64_t size, uint64_t granule);

  // The offset of a range of at least `bytes` (0 counts as 1), or nullopt
  // when no free range is that large.
  std::optional<uint64_t> Allocate(uint64_t bytes);
  // Returns the range that starts at `offset`; false (and no change) when
  // no range starts there.
  bool Free(uint64_t offset);

  uint64_t size() const { return size_; }
  // Bytes in allocated ranges (whole granules).
  uint64_t used() const { return used_; }
  // The largest range Allocate could hand out now.
  uint64_t largest_free() const;
  // Free ranges (a measure of fragmentation; 1 when nothing is allocated).
  size_t free_ranges() const { return free_by_offset_.size(); }

 private:
  void InsertFree(uint64_t offset, uint64_t length);
  void EraseFree(std::map<uint64_t, uint64_t>::iterator it);

  const uint64_t granule_;
  const uint64_t size_;
  uint64_t used_ = 0;
  // Free ranges by offset (offset -> length) and by (length, offset).
  std::map<uint64_t, uint64_t> free_by_offset_;
  std::set<std::pair<uint64_t, uint64_t>> free_by_length_;
  // Allocated ranges: offset -> length.
  std::map<uint64_t, uint64_t> allocated_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CUDA_ARENA_RANGES_H_
