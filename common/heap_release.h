// ReleaseFreeHeapMemory: gives the free memory glibc's malloc holds back to
// the system, for a server gone quiet after a burst.
//
// gemm-server keeps glibc's trim threshold high (1 GiB, TuneProcess), so
// that a large block freed while jobs run stays in its heap for the next
// one: with a low threshold (8 MiB) every large gRPC buffer's pages were
// given back on free and faulted in again on the next message, and 1024^3
// and 4096^3 jobs on the H200 host ran at half their rate
// (docs/decisions/0056-trim-threshold-1024-mib-again-the-heap-given.md). The
// memory a burst (or an attack) leaves in the heaps is given back here instead,
// once, when the server is idle:
//  - malloc_trim(0): the main arena's top, and the whole free pages inside
//    every arena's free chunks;
//  - the threads' arenas' heap tops, which malloc_trim() does not reach.
//    glibc trims an arena's top only as a large block (64 KiB or more) is
//    freed into that arena, past the trim threshold. So the threshold is
//    lowered for the moment, and one thread more than there can be arenas
//    (the limit the process set, at most glibc's eight per core), all alive
//    at once so that glibc hands each an arena in turn (a new thread takes
//    a free arena, else a new one under M_ARENA_MAX, else the next in
//    round robin), each allocate and free one such block; then the
//    threshold is set back to the one the process set
//    (SetMallocTrimThreshold, process_tuning.h).
// A process that set no trim threshold keeps glibc's sliding one: it gets
// malloc_trim(0) alone, as setting a threshold would fix glibc's mmap
// threshold too.
// It costs a thread start per arena (33 on a 16-core host with gemm-server's
// two per core: about a millisecond); threads that cannot be started are
// done without. A thread of the server that frees a large block meanwhile
// trims its arena too.
//
// Thread-safety: one call at a time (gemm-server's sweeper thread makes
// them).
//
//   if (server_quiet_for_half_a_second) ReleaseFreeHeapMemory();
#ifndef GEMM_COMMON_HEAP_RELEASE_H_
#define GEMM_COMMON_HEAP_RELEASE_H_

#include <cstdint>

#include "absl/time/time.h"

namespace gemm {

void ReleaseFreeHeapMemory();

// The process's resident bytes (/proc/self/statm); 0 if unreadable.
uint64_t ResidentBytes();

// When a server calls ReleaseFreeHeapMemory: once it has been quiet
// (`activity`, a count that moves while it works, unchanged, and nothing
// in flight) for quiet_before, at most every min_between, so that large
// jobs arriving with gaps do not fault their buffers in again each time;
// under a trickle of work that never leaves it quiet, at a look with
// nothing in flight once the work has gone on trickle_every unreleased.
// Nothing before the first work.
//
// Thread-safety: none; one thread looks (gemm-server's sweeper).
//
//   HeapReleaseSchedule schedule({}, absl::Now(), Activity());
//   if (schedule.Due(absl::Now(), Activity(), in_flight))
//   ReleaseFreeHeapMemory();
class HeapReleaseSchedule {
 public:
  struct Options {
    absl::Duration quiet_before = absl::Milliseconds(500);
    absl::Duration min_between = absl::Seconds(2);
    absl::Duration trickle_every = absl::Seconds(30);
  };

  HeapReleaseSchedule(const Options& options, absl::Time start,
                      uint64_t activity);

  // One look at the server; true when the memory is to be given back now.
  bool Due(absl::Time now, uint64_t activity, bool in_flight);

 private:
  const Options options_;
  uint64_t last_activity_;
  absl::Time quiet_since_;
  // Since when work has gone on without a release.
  absl::Time working_since_;
  absl::Time last_release_ = absl::InfinitePast();
  // Given back since the last work (true before the first: nothing to).
  bool released_ = true;
};

}  // namespace gemm

#endif  // GEMM_COMMON_HEAP_RELEASE_H_
