#include "client/lib/retry.h"

#include <chrono>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace gemm::client {
namespace {

using Clock = std::chrono::steady_clock;

TEST(BackoffBeforeRetryTest, GrowsByTheMultiplierUpToTheMaximum) {
  RetryPolicy policy;
  policy.initial_backoff = absl::Milliseconds(10);
  policy.max_backoff = absl::Milliseconds(50);
  EXPECT_EQ(BackoffBeforeRetry(policy, 1), absl::Milliseconds(10));
  EXPECT_EQ(BackoffBeforeRetry(policy, 2), absl::Milliseconds(20));
  EXPECT_EQ(BackoffBeforeRetry(policy, 3), absl::Milliseconds(40));
  EXPECT_EQ(BackoffBeforeRetry(policy, 4), absl::Milliseconds(50));
  EXPECT_EQ(BackoffBeforeRetry(policy, 30), absl::Milliseconds(50));
  policy.backoff_multiplier = 3;
  EXPECT_EQ(BackoffBeforeRetry(policy, 2), absl::Milliseconds(30));
}

TEST(ValidateRetryPolicyTest, RefusesPoliciesThatCannotWork) {
  EXPECT_TRUE(ValidateRetryPolicy(RetryPolicy()).ok());
  RetryPolicy no_attempts;
  no_attempts.max_attempts = 0;
  RetryPolicy shrinking;
  shrinking.backoff_multiplier = 0.5;
  RetryPolicy inverted;
  inverted.max_backoff = inverted.initial_backoff / 2;
  RetryPolicy too_jittery;
  too_jittery.jitter = 1.5;
  for (const RetryPolicy& bad :
       {no_attempts, shrinking, inverted, too_jittery}) {
    EXPECT_EQ(ValidateRetryPolicy(bad).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(RetrySchedulerTest, JitterStaysWithinItsBoundsAndVaries) {
  RetryPolicy policy;
  policy.initial_backoff = absl::Milliseconds(100);
  policy.jitter = 0.2;
  RetryScheduler retries(policy, /*seed=*/7);
  absl::Duration lowest = absl::InfiniteDuration(), highest;
  for (int i = 0; i < 1000; ++i) {
    const absl::Duration wait = retries.DrawBackoff(1);
    lowest = std::min(lowest, wait);
    highest = std::max(highest, wait);
  }
  EXPECT_GE(lowest, absl::Milliseconds(80));
  EXPECT_LE(highest, absl::Milliseconds(120));
  // Spread over most of the range, so that clients do not come back as one.
  EXPECT_LT(lowest, absl::Milliseconds(85));
  EXPECT_GT(highest, absl::Milliseconds(115));
}

TEST(RetrySchedulerTest, RunsEachTaskOnceItsWaitIsOverInDueOrder) {
  RetryPolicy policy;
  policy.initial_backoff = absl::Milliseconds(20);
  policy.max_backoff = absl::Seconds(1);
  policy.jitter = 0;
  RetryScheduler retries(policy);
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<double> waited_ms;
  absl::Notification all_ran;
  const Clock::time_point start = Clock::now();
  // Waits of 80, 20 and 40 ms (attempts 3, 1 and 2).
  for (int attempt : {3, 1, 2}) {
    retries.AfterBackoff(attempt, [&, attempt] {
      absl::MutexLock lock(&mu);
      order.push_back(attempt);
      waited_ms.push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - start)
              .count());
      if (order.size() == 3) all_ran.Notify();
    });
  }
  ASSERT_TRUE(all_ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_GE(waited_ms[0], 20);
  EXPECT_GE(waited_ms[1], 40);
  EXPECT_GE(waited_ms[2], 80);
}

TEST(RetrySchedulerTest, DestructorRunsTasksStillWaiting) {
  RetryPolicy policy;
  policy.initial_backoff = absl::Milliseconds(50);
  policy.jitter = 0;
  int ran = 0;
  {
    RetryScheduler retries(policy);
    retries.AfterBackoff(1, [&ran] { ++ran; });
    retries.AfterBackoff(2, [&ran] { ++ran; });
  }
  EXPECT_EQ(ran, 2);
}

}  // namespace
}  // namespace gemm::client
