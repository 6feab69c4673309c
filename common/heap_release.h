// ReleaseFreeHeapMemory: gives the free memory glibc's malloc holds back to
// the system, for a server gone quiet after a burst.
//
// gemm-server keeps glibc's trim threshold high (1 GiB, TuneProcess), so
// that a large block freed while jobs run stays in its heap for the next
// one: with a low threshold (8 MiB) every large gRPC buffer's pages were
// given back on free and faulted in again on the next message, and 1024^3
// and 4096^3 jobs on the H200 host ran at half their rate
// (docs/decisions.md 56). The memory a burst (or an attack) leaves in the
// heaps is given back here instead, once, when the server is idle:
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

namespace gemm {

void ReleaseFreeHeapMemory();

// The process's resident bytes (/proc/self/statm); 0 if unreadable.
uint64_t ResidentBytes();

}  // namespace gemm

#endif  // GEMM_COMMON_HEAP_RELEASE_H_
