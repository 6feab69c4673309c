#include "server/cuda/arena_ranges.h"

#include <iterator>

namespace gemm::server {

ArenaRanges::ArenaRanges(uint64_t size, uint64_t granule)
    : granule_(granule), size_(size / granule * granule) {
  if (size_ > 0) InsertFree(0, size_);
}

std::optional<uint64_t> ArenaRanges::Allocate(uint64_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes > size_) return std::nullopt;
  const uint64_t length = (bytes + granule_ - 1) / granule_ * granule_;
  auto fit = free_by_length_.lower_bound({length, 0});
  if (fit == free_by_length_.end()) return std::nullopt;
  const auto [free_length, offset] = *fit;
  EraseFree(free_by_offset_.find(offset));
  if (free_length > length) InsertFree(offset + length, free_length - length);
  allocated_.emplace(offset, length);
  used_ += length;
  return offset;
}

bool ArenaRanges::Free(uint64_t offset) {
  auto it = allocated_.find(offset);
  if (it == allocated_.end()) return false;
  uint64_t start = offset;
  uint64_t length = it->second;
  allocated_.erase(it);
  used_ -= length;
  // Merge with the free range after it, then with the one before it.
  auto next = free_by_offset_.lower_bound(start);
  if (next != free_by_offset_.end() && next->first == start + length) {
    length += next->second;
    next = std::next(next);
    EraseFree(std::prev(next));
  }
  if (next != free_by_offset_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      length += prev->second;
      EraseFree(prev);
    }
  }
  InsertFree(start, length);
  return true;
}

uint64_t ArenaRanges::largest_free() const {
  return free_by_length_.empty() ? 0 : free_by_length_.rbegin()->first;
}

void ArenaRanges::InsertFree(uint64_t offset, uint64_t length) {
  free_by_offset_.emplace(offset, length);
  free_by_length_.emplace(length, offset);
}

void ArenaRanges::EraseFree(std::map<uint64_t, uint64_t>::iterator it) {
  free_by_length_.erase({it->second, it->first});
  free_by_offset_.erase(it);
}

}  // namespace gemm::server
