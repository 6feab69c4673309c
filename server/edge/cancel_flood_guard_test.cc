#include "server/edge/cancel_flood_guard.h"

#include "gtest/gtest.h"

namespace gemm::server {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

TEST(CancelFloodGuardTest, TripsWhenTheAllowanceIsSpentAndStartsOver) {
  CancelFloodGuard guard(
      {.max_early_cancels = 100, .shut_out_for = absl::Seconds(10)});
  for (int i = 0; i < 100; ++i) {
    ASSERT_FALSE(guard.OnEarlyCancel("10.0.0.1", kStart)) << i;
  }
  EXPECT_TRUE(guard.OnEarlyCancel("10.0.0.1", kStart)) << "the 101st";
  EXPECT_EQ(guard.trips(), 1u);
  // Shut out: the cancels that shutting its connections causes do not
  // count, nor trip it again.
  for (int i = 0; i < 1000; ++i) {
    ASSERT_FALSE(guard.OnEarlyCancel("10.0.0.1", kStart + absl::Seconds(9)));
  }
  EXPECT_EQ(guard.trips(), 1u);
  // Full again once the shut-out is over.
  const absl::Time later = kStart + absl::Seconds(10);
  for (int i = 0; i < 100; ++i) {
    ASSERT_FALSE(guard.OnEarlyCancel("10.0.0.1", later)) << i;
  }
  EXPECT_TRUE(guard.OnEarlyCancel("10.0.0.1", later));
  EXPECT_EQ(guard.trips(), 2u);
}

TEST(CancelFloodGuardTest, ClientsHaveAllowancesOfTheirOwn) {
  CancelFloodGuard guard({.max_early_cancels = 10});
  for (int i = 0; i < 10; ++i) guard.OnEarlyCancel("10.0.0.1", kStart);
  EXPECT_FALSE(guard.OnEarlyCancel("10.0.0.2", kStart));
  EXPECT_TRUE(guard.OnEarlyCancel("10.0.0.1", kStart));
}

// A tenth of the allowance a second: a client that cancels at that rate
// forever never trips it; one a little faster does.
TEST(CancelFloodGuardTest, RefillsATenthASecond) {
  CancelFloodGuard guard({.max_early_cancels = 100});
  absl::Time now = kStart;
  for (int i = 0; i < 100; ++i) guard.OnEarlyCancel("a", now);
  for (int second = 0; second < 60; ++second) {
    now += absl::Seconds(1);
    for (int i = 0; i < 10; ++i) {
      ASSERT_FALSE(guard.OnEarlyCancel("a", now)) << second << " " << i;
    }
  }
  now += absl::Seconds(1);
  bool tripped = false;
  for (int i = 0; i < 11 && !tripped; ++i) {
    tripped = guard.OnEarlyCancel("a", now);
  }
  EXPECT_TRUE(tripped) << "11 in a second with an empty bucket";
}

TEST(CancelFloodGuardTest, ZeroMeansNoLimit) {
  CancelFloodGuard guard({.max_early_cancels = 0});
  for (int i = 0; i < 100000; ++i) {
    ASSERT_FALSE(guard.OnEarlyCancel("a", kStart));
  }
  EXPECT_EQ(guard.trips(), 0u);
}

TEST(CancelFloodGuardTest, ManyClientsDoNotGrowItWithoutBound) {
  CancelFloodGuard guard({.max_early_cancels = 5});
  absl::Time now = kStart;
  for (int i = 0; i < 20000; ++i) {
    ASSERT_FALSE(guard.OnEarlyCancel(std::to_string(i), now));
    now += absl::Milliseconds(1);
  }
  // Still counts a client that is flooding.
  for (int i = 0; i < 5; ++i) guard.OnEarlyCancel("flood", now);
  EXPECT_TRUE(guard.OnEarlyCancel("flood", now));
}

}  // namespace
}  // namespace gemm::server
