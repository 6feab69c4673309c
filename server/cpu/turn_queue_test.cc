#include "server/cpu/turn_queue.h"

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace gemm::server {
namespace {

// Waits until `queue` has `asked` turns asked for; false after 10 s.
bool WaitForAsked(const TurnQueue& queue, uint64_t asked) {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (queue.asked() != asked) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// The CPU backend's heavy step waited until no light job was waiting, so
// light jobs back to back from two workers held it back without bound.
// Turns now go in the order asked: the step that asked before a light job
// runs before it.
TEST(TurnQueueTest, TurnsGoInTheOrderAsked) {
  TurnQueue queue;
  std::mutex order_mu;
  std::vector<std::string> order;
  auto take = [&](const std::string& who) {
    TurnQueue::Turn turn(&queue);
    std::lock_guard<std::mutex> lock(order_mu);
    order.push_back(who);
  };
  std::vector<std::thread> threads;
  {
    TurnQueue::Turn running(&queue);
    for (const char* who : {"step", "light 1", "light 2", "next step"}) {
      const uint64_t before = queue.asked();
      threads.emplace_back(take, who);
      // Each asks before the next starts (the threads are joined below,
      // whatever happens here).
      EXPECT_TRUE(WaitForAsked(queue, before + 1)) << who;
    }
    EXPECT_EQ(queue.asked(), 5u);
    std::lock_guard<std::mutex> lock(order_mu);
    EXPECT_TRUE(order.empty()) << "a turn began while another ran";
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<std::string>{"step", "light 1", "light 2",
                                             "next step"}));
  EXPECT_EQ(queue.asked(), 0u);
}

TEST(TurnQueueTest, OneTurnAtATime) {
  TurnQueue queue;
  std::atomic<int> inside{0}, most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        TurnQueue::Turn turn(&queue);
        const int now = ++inside;
        if (now > most) most = now;
        --inside;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(most.load(), 1);
  EXPECT_EQ(queue.asked(), 0u);
}

}  // namespace
}  // namespace gemm::server
