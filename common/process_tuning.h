// Process-wide settings that gemm-server and gemm-client make first thing in
// main() (TuneProcess()), each measured on the H200 host
// (docs/reference/performance.md).
//
// Allocator: keeps glibc's malloc from handing large blocks back to the
// kernel on every free. gRPC receives messages into freshly allocated
// slices of up to a few MiB; with glibc's defaults each such block is mmap'd
// and munmap'd (or trimmed with madvise) per message, and every byte then costs
// a page fault on the way in and a TLB shootdown across all cores on the way
// out. On a 2-core VM that tripled the CPU per byte of both gemm-server and
// gemm-client. Programs that use libgemm_client for large jobs may do the
// same (or set
// GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824).
// Memory stays bounded by the process's peak use: freed blocks are reused,
// not returned.
//
// Arenas (gemm-server's --malloc-arenas, LimitMallocArenas): glibc gives
// each thread that meets a locked arena one of its own, up to 8 per core,
// and malloc_trim() never returns the free memory at the top of those
// arenas' heaps (only the main arena's); with two arenas that is at most
// one 64 MiB heap. After big-unary-unread at full size on the H200 host the
// server kept 154-214 MiB over its idle size there, through two trims;
// with two arenas it kept 8-45 MiB, at a throughput within the spread of
// the default's. But two arenas doubled other clients' p99 under several
// attacks there: gemm-server keeps to two per core
// (docs/decisions/0045-two-malloc-arenas-in-gemm-server.md, 48 and 55).
//
// Mutexes: Debian's abseil checks every absl::Mutex acquisition for lock
// cycles, through one global graph behind a spin lock (a profile of the
// server under 128^3 load had GraphCycles::GetId and SpinLock::SpinLoop
// among its top symbols). Tests keep the check; the programs turn it off.
//
// Thread-safety: call once, before other threads start
// (SetMallocTrimThreshold excepted, as it says).
//
//   int main(int argc, char** argv) {
//     gemm::TuneProcess();
//     ... flags ...; gemm::LimitMallocArenas(2);  // --malloc-arenas 2
#ifndef GEMM_COMMON_PROCESS_TUNING_H_
#define GEMM_COMMON_PROCESS_TUNING_H_

#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "absl/synchronization/mutex.h"

namespace gemm {

namespace process_tuning_internal {
// What this process set, for ReleaseFreeHeapMemory (heap_release.h): the
// trim threshold (0: glibc's own, never set) and the arena limit (0:
// glibc's, eight per core).
inline std::atomic<uint64_t>& TrimThresholdSet() {
  static std::atomic<uint64_t> bytes{0};
  return bytes;
}
inline std::atomic<int>& ArenaLimitSet() {
  static std::atomic<int> arenas{0};
  return arenas;
}
}  // namespace process_tuning_internal

inline void TuneProcess() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#ifdef M_MMAP_THRESHOLD
  // Blocks under 32 MiB (glibc's largest setting) come from the heap, and a
  // fixed threshold turns off glibc's sliding one.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  // Free memory at the top of a heap is given back only beyond 1 GiB.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  process_tuning_internal::TrimThresholdSet() = uint64_t{1} << 30;
#endif
}

// Free memory at the top of a malloc heap beyond `bytes` (at most 1 GiB)
// is given back to the system when a large block is freed into it
// (TuneProcess sets 1 GiB). The threads' arenas give theirs back only this
// way: malloc_trim() does not reach their tops (ReleaseFreeHeapMemory,
// heap_release.h, reaches them). Unlike the others here it
// may be called once threads run (ReleaseFreeHeapMemory lowers it for a
// moment): glibc sets the one word under the main arena's lock, and a
// thread that reads it early trims by the old value once.
inline void SetMallocTrimThreshold(uint64_t bytes) {
#ifdef M_TRIM_THRESHOLD
  bytes = std::min<uint64_t>(bytes, uint64_t{1} << 30);
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(bytes));
  process_tuning_internal::TrimThresholdSet() = bytes;
#endif
}

// The trim threshold this process set; 0 when it set none.
inline uint64_t MallocTrimThresholdSet() {
  return process_tuning_internal::TrimThresholdSet().load();
}

// At most `arenas` malloc arenas, the main one included. Call before
// other threads start.
inline void LimitMallocArenas(int arenas) {
#ifdef M_ARENA_MAX
  mallopt(M_ARENA_MAX, arenas);
  process_tuning_internal::ArenaLimitSet() = arenas;
#endif
}

// The arena limit this process set; 0 when it set none.
inline int MallocArenaLimitSet() {
  return process_tuning_internal::ArenaLimitSet().load();
}

// Raises the soft limit on open files to the hard one (a server takes a
// descriptor per connection) and returns the limit now in force.
inline uint64_t RaiseOpenFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? ~uint64_t{0} : limit.rlim_cur;
}

}  // namespace gemm

#endif  // GEMM_COMMON_PROCESS_TUNING_H_
