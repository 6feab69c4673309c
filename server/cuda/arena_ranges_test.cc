#include "server/cuda/arena_ranges.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gemm::server {
namespace {

constexpr uint64_t kGranule = 4096;

TEST(ArenaRangesTest, RoundsToGranulesAndRefusesWhatDoesNotFit) {
  ArenaRanges ranges(10 * kGranule + 100, kGranule);
  EXPECT_EQ(ranges.size(), 10 * kGranule) << "rounded down to granules";
  const std::optional<uint64_t> a = ranges.Allocate(1);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a, 0u);
  EXPECT_EQ(ranges.used(), kGranule);
  const std::optional<uint64_t> b = ranges.Allocate(kGranule + 1);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(*b, kGranule);
  EXPECT_EQ(ranges.used(), 3 * kGranule);
  EXPECT_FALSE(ranges.Allocate(7 * kGranule + 1).has_value());
  EXPECT_FALSE(ranges.Allocate(uint64_t{1} << 62).has_value());
  EXPECT_TRUE(ranges.Allocate(7 * kGranule).has_value());
  EXPECT_EQ(ranges.largest_free(), 0u);
  EXPECT_FALSE(ranges.Allocate(1).has_value()) << "full";
}

TEST(ArenaRangesTest, FreeingMergesNeighboursBackIntoOneRange) {
  ArenaRanges ranges(8 * kGranule, kGranule);
  std::vector<uint64_t> offsets;
  for (int i = 0; i < 8; ++i) offsets.push_back(*ranges.Allocate(kGranule));
  // Free every other one: four separate holes of one granule.
  for (int i = 0; i < 8; i += 2) ASSERT_TRUE(ranges.Free(offsets[i]));
  EXPECT_EQ(ranges.free_ranges(), 4u);
  EXPECT_EQ(ranges.largest_free(), kGranule);
  EXPECT_FALSE(ranges.Allocate(2 * kGranule).has_value());
  // The rest: each joins the holes on both sides.
  for (int i = 1; i < 8; i += 2) ASSERT_TRUE(ranges.Free(offsets[i]));
  EXPECT_EQ(ranges.free_ranges(), 1u);
  EXPECT_EQ(ranges.largest_free(), 8 * kGranule);
  EXPECT_EQ(ranges.used(), 0u);
}

TEST(ArenaRangesTest, BestFitKeepsTheLargeRangeForALargeRequest) {
  ArenaRanges ranges(16 * kGranule, kGranule);
  const uint64_t a = *ranges.Allocate(2 * kGranule);  // [0, 2)
  const uint64_t b = *ranges.Allocate(kGranule);      // [2, 3)
  ranges.Free(a);  // free: [0, 2) and [3, 16)
  // A one-granule request goes to the two-granule hole, not the large one.
  EXPECT_EQ(*ranges.Allocate(kGranule), 0u);
  EXPECT_EQ(ranges.largest_free(), 13 * kGranule);
  EXPECT_EQ(*ranges.Allocate(13 * kGranule), 3 * kGranule);
  ranges.Free(b);
}

TEST(ArenaRangesTest, FreeOfAnUnknownOffsetChangesNothing) {
  ArenaRanges ranges(4 * kGranule, kGranule);
  const uint64_t a = *ranges.Allocate(2 * kGranule);
  EXPECT_FALSE(ranges.Free(a + kGranule)) << "inside a range";
  EXPECT_FALSE(ranges.Free(3 * kGranule)) << "a free range";
  EXPECT_TRUE(ranges.Free(a));
  EXPECT_FALSE(ranges.Free(a)) << "twice";
  EXPECT_EQ(ranges.used(), 0u);
  EXPECT_EQ(ranges.largest_free(), 4 * kGranule);
}

TEST(ArenaRangesTest, EmptyArenaHasNothingToGive) {
  ArenaRanges ranges(kGranule - 1, kGranule);
  EXPECT_EQ(ranges.size(), 0u);
  EXPECT_FALSE(ranges.Allocate(1).has_value());
  EXPECT_EQ(ranges.free_ranges(), 0u);
}

// Random allocations and frees against a model of the arena's granules:
// ranges never overlap, the counts agree, and a request fails only when no
// run of free granules is long enough (free ranges are always merged).
TEST(ArenaRangesTest, RandomUseAgreesWithAModelOfTheGranules) {
  constexpr uint64_t kGranules = 512;
  ArenaRanges ranges(kGranules * kGranule, kGranule);
  std::vector<int> owner(kGranules, -1);  // which allocation holds a granule
  struct Held {
    uint64_t offset;
    uint64_t granules;
  };
  std::vector<Held> held;
  std::mt19937_64 rng(20261202);
  auto longest_free_run = [&] {
    uint64_t best = 0, run = 0;
    for (int o : owner) {
      run = o < 0 ? run + 1 : 0;
      best = std::max(best, run);
    }
    return best;
  };
  for (int step = 0; step < 20000; ++step) {
    if (held.empty() || rng() % 100 < 55) {
      // Mostly small requests, now and then a large one.
      const uint64_t bytes = rng() % 10 == 0 ? 1 + rng() % (96 * kGranule)
                                             : 1 + rng() % (6 * kGranule);
      const uint64_t granules = (bytes + kGranule - 1) / kGranule;
      const uint64_t longest = longest_free_run();
      ASSERT_EQ(ranges.largest_free(), longest * kGranule) << "step " << step;
      const std::optional<uint64_t> offset = ranges.Allocate(bytes);
      ASSERT_EQ(offset.has_value(), granules <= longest) << "step " << step;
      if (!offset) continue;
      ASSERT_EQ(*offset % kGranule, 0u);
      const uint64_t first = *offset / kGranule;
      ASSERT_LE(first + granules, kGranules);
      for (uint64_t g = first; g < first + granules; ++g) {
        ASSERT_EQ(owner[g], -1) << "granule " << g << " handed out twice";
        owner[g] = step;
      }
      held.push_back({*offset, granules});
    } else {
      const size_t pick = rng() % held.size();
      const Held h = held[pick];
      held[pick] = held.back();
      held.pop_back();
      ASSERT_TRUE(ranges.Free(h.offset));
      for (uint64_t g = h.offset / kGranule;
           g < h.offset / kGranule + h.granules; ++g) {
        owner[g] = -1;
      }
    }
    const uint64_t used_granules = static_cast<uint64_t>(std::count_if(
        owner.begin(), owner.end(), [](int o) { return o >= 0; }));
    ASSERT_EQ(ranges.used(), used_granules * kGranule) << "step " << step;
  }
  for (const Held& h : held) ASSERT_TRUE(ranges.Free(h.offset));
  EXPECT_EQ(ranges.used(), 0u);
  EXPECT_EQ(ranges.free_ranges(), 1u);
  EXPECT_EQ(ranges.largest_free(), kGranules * kGranule);
}

}  // namespace
}  // namespace gemm::server
