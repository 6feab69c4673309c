// SharedMemoryMapping: a caller's POSIX shared-memory object, checked,
// mapped into the server and guarded (mapping_guard.h) for a region
// (region_registry.h).
//
// Map() refuses, with a status naming the field, a key that is not a
// shared-memory name or lacks the server's prefix, an offset that is not a
// multiple of 4, an empty size, an object that is missing, unreadable, not
// a regular file (it opens non-blocking, so a FIFO under the name cannot
// hang it) or shorter than offset + size. It maps read-write, or
// read-only when asked or when the server's user may not write the object.
//
// Thread-safety: immutable once mapped; the destructor unmaps.
//
//   ASSIGN_OR_RETURN(auto shm, SharedMemoryMapping::Map(request.system(),
//                                                       "/gemm-"));
//   float* a = reinterpret_cast<float*>(shm->data() + offset);
#ifndef GEMM_SERVER_REGIONS_SHM_MAPPING_H_
#define GEMM_SERVER_REGIONS_SHM_MAPPING_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/gemm.pb.h"
#include "server/regions/mapping_guard.h"

namespace gemm::server {

class SharedMemoryMapping {
 public:
  static absl::StatusOr<std::unique_ptr<SharedMemoryMapping>> Map(
      const v1::SystemSharedMemory& system, absl::string_view key_prefix);
  SharedMemoryMapping(const SharedMemoryMapping&) = delete;
  SharedMemoryMapping& operator=(const SharedMemoryMapping&) = delete;
  ~SharedMemoryMapping();  // drops the guard, then unmaps

  // The page-aligned mapping (what a driver pins).
  void* base() const { return base_; }
  size_t length() const { return length_; }
  // The region's first byte (the object's byte `offset`).
  char* data() const { return data_; }
  bool read_only() const { return read_only_; }
  // True once the object shrank under the mapping (MappingGuard).
  bool faulted() const { return guard_ != nullptr && guard_->faulted(); }

 private:
  SharedMemoryMapping() = default;

  void* base_ = nullptr;
  size_t length_ = 0;
  char* data_ = nullptr;
  bool read_only_ = false;
  std::unique_ptr<MappingGuard> guard_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_REGIONS_SHM_MAPPING_H_
