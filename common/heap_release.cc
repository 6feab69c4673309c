#include "common/heap_release.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "absl/synchronization/barrier.h"
#include "common/process_tuning.h"

namespace gemm {
namespace {

// A block freed into an arena makes glibc look at the arena's top when it
// is at least FASTBIN_CONSOLIDATION_THRESHOLD (64 KiB); under the mmap
// threshold (TuneProcess: 32 MiB, else glibc's 128 KiB at the least) so
// that it comes from the arena.
constexpr size_t kTouchBytes = 96 << 10;
// The top kept in each arena while trimming.
constexpr uint64_t kLowTrimThreshold = 1 << 20;

}  // namespace

void ReleaseFreeHeapMemory() {
  const uint64_t threshold = MallocTrimThresholdSet();
  if (threshold == 0) {
    malloc_trim(0);
    return;
  }
  int arenas = MallocArenaLimitSet();
  if (arenas <= 0) {
    arenas =
        8 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  const int threads = arenas + 1;
  SetMallocTrimThreshold(kLowTrimThreshold);
  {
    // Every thread holds its block until all have one, so that none gives
    // its arena back (to the free list the next thread would take it
    // from) before the others have theirs.
    absl::Barrier* all_allocated = new absl::Barrier(threads);
    std::vector<std::thread> touchers;
    touchers.reserve(threads);
    for (int i = 0; i < threads; ++i) {
      touchers.emplace_back([all_allocated] {
        void* block = std::malloc(kTouchBytes);
        // Written, so the allocation is not elided.
        if (block != nullptr) static_cast<volatile char*>(block)[0] = 1;
        if (all_allocated->Block()) delete all_allocated;
        std::free(block);
      });
    }
    for (std::thread& t : touchers) t.join();
  }
  malloc_trim(0);
  SetMallocTrimThreshold(threshold);
}

uint64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return got == 2 ? uint64_t{resident} * sysconf(_SC_PAGESIZE) : 0;
}

}  // namespace gemm
