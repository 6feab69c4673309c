#include "common/heap_release.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
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

// Arenas glibc may have: the limit set, else its own (eight per core); at
// most eight per core either way.
int ArenasAtMost() {
  const int glibc =
      8 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int set = MallocArenaLimitSet();
  return set > 0 ? std::min(set, glibc) : glibc;
}

// One thread per arena, each holding a block until all hold one (so that
// none gives its arena back to the free list another would take it from),
// then freeing it with the threshold low. Threads that cannot be made are
// done without: the others still go.
struct Tally {
  int allocated = 0;
  int started = 0;
  bool AllAllocated() const { return allocated >= started; }
};

void TouchEveryArena() {
  absl::Mutex mu;
  Tally tally;
  absl::Notification all_allocated;
  std::vector<std::thread> touchers;
  const int wanted = ArenasAtMost() + 1;
  touchers.reserve(wanted);
  for (int i = 0; i < wanted; ++i) {
    try {
      touchers.emplace_back([&] {
        void* block = std::malloc(kTouchBytes);
        // Written, so the allocation is not elided.
        if (block != nullptr) static_cast<volatile char*>(block)[0] = 1;
        {
          absl::MutexLock lock(&mu);
          ++tally.allocated;
        }
        all_allocated.WaitForNotification();
        std::free(block);
      });
    } catch (const std::system_error&) {
      break;  // no more threads to be had now
    }
  }
  {
    absl::MutexLock lock(&mu);
    tally.started = static_cast<int>(touchers.size());
    mu.Await(absl::Condition(&tally, &Tally::AllAllocated));
  }
  all_allocated.Notify();
  for (std::thread& t : touchers) t.join();
}

}  // namespace

void ReleaseFreeHeapMemory() {
  const uint64_t threshold = MallocTrimThresholdSet();
  if (threshold == 0) {
    malloc_trim(0);
    return;
  }
  SetMallocTrimThreshold(kLowTrimThreshold);
  TouchEveryArena();
  malloc_trim(0);
  SetMallocTrimThreshold(threshold);
}

HeapReleaseSchedule::HeapReleaseSchedule(const Options& options,
                                         absl::Time start, uint64_t activity)
    : options_(options),
      last_activity_(activity),
      quiet_since_(start),
      working_since_(start) {}

bool HeapReleaseSchedule::Due(absl::Time now, uint64_t activity,
                              bool in_flight) {
  const bool changed = activity != last_activity_;
  if (changed || in_flight) {
    last_activity_ = activity;
    quiet_since_ = now;
    if (released_) working_since_ = now;
    released_ = false;
  }
  if (released_ || in_flight) return false;
  const bool quiet = !changed && now - quiet_since_ >= options_.quiet_before &&
                     now - last_release_ >= options_.min_between;
  // Work that has gone on unreleased that long, not a first job after a
  // long idle spell.
  const bool trickle = now - working_since_ >= options_.trickle_every &&
                       now - last_release_ >= options_.trickle_every;
  if (!quiet && !trickle) return false;
  // After a trickle's release the work goes on, unreleased again from now.
  released_ = quiet;
  working_since_ = now;
  last_release_ = now;
  return true;
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
