#include "common/heap_release.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/synchronization/barrier.h"
#include "common/process_tuning.h"
#include "gtest/gtest.h"

namespace gemm {

// The test process's arenas (main() sets them).
constexpr int kTestArenas = 4;

namespace {

int64_t ResidentBytes() { return static_cast<int64_t>(gemm::ResidentBytes()); }

// `threads` threads, all alive at once (so spread over the arenas), each
// allocate and write `blocks` blocks of `bytes`, then free them.
void BurstInThreads(int threads, int blocks, size_t bytes) {
  absl::Barrier* all_written = new absl::Barrier(threads);
  std::vector<std::thread> burst;
  for (int t = 0; t < threads; ++t) {
    burst.emplace_back([=] {
      std::vector<void*> held;
      for (int b = 0; b < blocks; ++b) {
        void* p = std::malloc(bytes);
        ASSERT_NE(p, nullptr);
        std::memset(p, 0x5a, bytes);
        held.push_back(p);
      }
      if (all_written->Block()) delete all_written;
      // Freed in reverse, so each merges into its arena's top.
      for (auto it = held.rbegin(); it != held.rend(); ++it) std::free(*it);
    });
  }
  for (std::thread& t : burst) t.join();
}

TEST(HeapReleaseTest, GivesBackWhatABurstInThreadsLeftInTheirArenas) {
  // 8 threads x 24 MiB in 1 MiB blocks: heap blocks (under TuneProcess's
  // 32 MiB mmap threshold) kept in the arenas' tops by the 1 GiB trim
  // threshold once freed.
  const int64_t before = ResidentBytes();
  BurstInThreads(8, 24, 1 << 20);
  const int64_t kept = ResidentBytes() - before;
  ASSERT_GT(kept, int64_t{64} << 20)
      << "the burst's memory should stay with the process before release";

  ReleaseFreeHeapMemory();
  const int64_t left = ResidentBytes() - before;
  EXPECT_LT(left, int64_t{16} << 20)
      << "kept " << (kept >> 20) << " MiB after the burst, " << (left >> 20)
      << " MiB after the release";

  // The threshold is back: a second burst's memory stays again.
  EXPECT_EQ(MallocTrimThresholdSet(), uint64_t{1} << 30);
  BurstInThreads(8, 24, 1 << 20);
  EXPECT_GT(ResidentBytes() - before, int64_t{64} << 20);
}

TEST(HeapReleaseScheduleTest, OncePerQuietSpellAtMostEveryMinBetween) {
  const absl::Time t0 = absl::UnixEpoch();
  auto at = [t0](int ms) { return t0 + absl::Milliseconds(ms); };
  HeapReleaseSchedule schedule({}, t0, 0);
  // Nothing before the first work, however long it stays idle.
  EXPECT_FALSE(schedule.Due(at(60000), 0, false));
  // Work, then 500 ms quiet: once.
  EXPECT_FALSE(schedule.Due(at(60100), 5, false));
  EXPECT_FALSE(schedule.Due(at(60400), 5, false));
  EXPECT_TRUE(schedule.Due(at(60600), 5, false));
  EXPECT_FALSE(schedule.Due(at(61500), 5, false));
  // A job 700 ms later, quiet again 500 ms on: not within 2 s of the last.
  EXPECT_FALSE(schedule.Due(at(61300), 6, false));
  EXPECT_FALSE(schedule.Due(at(61900), 6, false));
  EXPECT_TRUE(schedule.Due(at(62700), 6, false));
  // Nothing while a job is in flight, however long.
  EXPECT_FALSE(schedule.Due(at(63000), 6, true));
  EXPECT_FALSE(schedule.Due(at(70000), 6, true));
}

TEST(HeapReleaseScheduleTest, ATrickleThatNeverGoesQuietGetsOneEvery30s) {
  const absl::Time t0 = absl::UnixEpoch();
  HeapReleaseSchedule schedule({}, t0, 0);
  int releases = 0;
  // A job answered every 400 ms for 95 s: never 500 ms quiet.
  for (int ms = 400, activity = 1; ms <= 95000; ms += 400, ++activity) {
    releases += schedule.Due(t0 + absl::Milliseconds(ms), activity, false);
  }
  EXPECT_EQ(releases, 3);
}

}  // namespace
}  // namespace gemm

int main(int argc, char** argv) {
  // As gemm-server does, before any thread starts.
  gemm::TuneProcess();
  gemm::LimitMallocArenas(gemm::kTestArenas);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
