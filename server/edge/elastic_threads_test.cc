#include "server/edge/elastic_threads.h"

#include <atomic>
#include <memory>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace gemm::server {
namespace {

// Polls `done` for up to 10 s.
template <typename Done>
bool Eventually(Done done) {
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (!done()) {
    if (absl::Now() > until) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// Notifies `release` when it goes out of scope, unless it was: declared
// after the pool, it runs first, so that a failed assertion does not leave
// the pool's destructor waiting for a task blocked on `release`.
auto NotifiedOnExit(absl::Notification& release) {
  return absl::MakeCleanup([&release] {
    if (!release.HasBeenNotified()) release.Notify();
  });
}

TEST(ElasticThreadsTest, ATaskThatHoldsItsThreadDoesNotDelayTheNext) {
  absl::Notification release;
  ElasticThreads threads({.max_threads = 4});
  auto released = NotifiedOnExit(release);
  absl::Notification held;
  ASSERT_TRUE(threads.Run([&] {
    held.Notify();
    release.WaitForNotification();
  }));
  held.WaitForNotification();
  absl::Notification second_ran;
  ASSERT_TRUE(threads.Run([&] { second_ran.Notify(); }));
  EXPECT_TRUE(second_ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(threads.threads(), 2u);
}

TEST(ElasticThreadsTest, AnIdleThreadIsReusedAndEndsWhenIdleTooLong) {
  ElasticThreads threads({.idle_exit = absl::Milliseconds(200)});
  std::atomic<int> ran{0};
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(threads.Run([&] { ran.fetch_add(1); }));
    // Ran, and its thread back to idle before the next task comes.
    ASSERT_TRUE(
        Eventually([&] { return ran.load() == i + 1 && threads.idle() == 1; }));
  }
  // One task at a time, each after the last ended: one thread did them all.
  EXPECT_EQ(threads.threads(), 1u);
  EXPECT_TRUE(Eventually([&] { return threads.threads() == 0; }));
  // And a thread starts again for the next task.
  absl::Notification again;
  ASSERT_TRUE(threads.Run([&] { again.Notify(); }));
  EXPECT_TRUE(again.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

TEST(ElasticThreadsTest, AtTheCapTasksWaitAndPastTheQueueTheyAreRefused) {
  absl::Notification release;
  ElasticThreads threads({.max_threads = 2, .max_queued = 3});
  auto released = NotifiedOnExit(release);
  std::atomic<int> holding{0};
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(threads.Run([&] {
      holding.fetch_add(1);
      release.WaitForNotification();
    }));
  }
  ASSERT_TRUE(Eventually([&] { return holding.load() == 2; }));
  std::atomic<int> waited{0};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(threads.Run([&] { waited.fetch_add(1); }));
  }
  EXPECT_EQ(threads.threads(), 2u);
  EXPECT_EQ(threads.queued(), 3u);
  // The refused task is destroyed unrun: what it owns is released.
  auto owned = std::make_shared<int>(7);
  std::weak_ptr<int> watch = owned;
  EXPECT_FALSE(threads.Run([owned = std::move(owned)] {}));
  EXPECT_TRUE(watch.expired());
  release.Notify();
  EXPECT_TRUE(Eventually([&] { return waited.load() == 3; }));
}

TEST(ElasticThreadsTest, CloseDropsQueuedTasksAndLetsRunningOnesFinish) {
  absl::Notification release;
  std::atomic<bool> finished{false};
  auto owned = std::make_shared<int>(7);
  std::weak_ptr<int> watch = owned;
  {
    ElasticThreads threads({.max_threads = 1});
    auto released = NotifiedOnExit(release);
    absl::Notification held;
    ASSERT_TRUE(threads.Run([&] {
      held.Notify();
      release.WaitForNotification();
      finished = true;
    }));
    held.WaitForNotification();
    ASSERT_TRUE(threads.Run([owned = std::move(owned)] { FAIL(); }));
    threads.Close();
    EXPECT_TRUE(watch.expired());
    EXPECT_FALSE(threads.Run([] { FAIL(); }));
    release.Notify();
    // The destructor waits for the running task.
  }
  EXPECT_TRUE(finished);
}

}  // namespace
}  // namespace gemm::server
