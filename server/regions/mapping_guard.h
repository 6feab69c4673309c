// MappingGuard: survives a shared-memory object shrinking under its mapping.
//
// The server maps callers' POSIX shared-memory objects (region_registry.h).
// A caller may truncate such an object while it is mapped; touching the
// pages past the new end then raises SIGBUS, which would kill the server.
// A guarded mapping is listed where a SIGBUS handler finds it: a fault
// inside it replaces the whole mapping with private zero pages (so the
// access, and any later one, completes harmlessly) and marks the guard
// faulted, for the jobs using it to fail. A fault anywhere else goes to the
// handler that was there before (or kills the process as usual). Wayland
// compositors treat clients' shared-memory pools the same way.
//
// Thread-safety: thread-safe. The handler takes no lock and calls nothing
// but mmap (a system call on Linux, though POSIX does not list it as
// async-signal-safe).
//
//   MappingGuard guard(base, length);   // after mmap
//   ... use the mapping ...
//   if (guard.faulted()) ... the object shrank; results are garbage ...
#ifndef GEMM_SERVER_REGIONS_MAPPING_GUARD_H_
#define GEMM_SERVER_REGIONS_MAPPING_GUARD_H_

#include <cstddef>

namespace gemm::server {

class MappingGuard {
 public:
  // Most mappings guarded at once; a guard past it has guarded() false.
  static constexpr int kMaxGuarded = 4096;

  // Guards [base, base + length), a page-aligned MAP_SHARED mapping that
  // must outlive the guard. Installs the SIGBUS handler on first use.
  MappingGuard(void* base, size_t length);
  MappingGuard(const MappingGuard&) = delete;
  MappingGuard& operator=(const MappingGuard&) = delete;
  ~MappingGuard();

  // False when the table was full: a fault in this mapping then kills the
  // process as it would without a guard.
  bool guarded() const { return slot_ >= 0; }
  // True once a fault inside the mapping replaced it with zero pages.
  bool faulted() const;

 private:
  int slot_ = -1;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_REGIONS_MAPPING_GUARD_H_
