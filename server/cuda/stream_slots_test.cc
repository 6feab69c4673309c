#include "server/cuda/stream_slots.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace gemm::server {
namespace {

TEST(StreamSlotsTest, IdleDevicesTakeTurns) {
  StreamSlots slots(3, 2);
  for (size_t round = 0; round < 2; ++round) {
    for (size_t device = 0; device < 3; ++device) {
      StreamSlots::Slot slot = *slots.Acquire(0);
      EXPECT_EQ(slot.device, device);
      slots.Release(slot, 0);
    }
  }
}

TEST(StreamSlotsTest, TheLeastLoadedDeviceWins) {
  StreamSlots slots(2, 2);
  StreamSlots::Slot heavy = *slots.Acquire(1000);  // device 0
  StreamSlots::Slot light = *slots.Acquire(10);    // device 1
  EXPECT_EQ(heavy.device, 0u);
  EXPECT_EQ(light.device, 1u);
  // Device 0 would win the tie, but device 1 carries less.
  StreamSlots::Slot next = *slots.Acquire(10);
  EXPECT_EQ(next.device, 1u);
  EXPECT_NE(next.stream, light.stream);
  slots.Release(next, 10);
  slots.Release(light, 10);
  slots.Release(heavy, 1000);
}

// A re-run after a failed result check goes to another device while one
// is in service, and to the same one when it is the only one left.
TEST(StreamSlotsTest, AcquireAvoidingTakesAnotherDevice) {
  StreamSlots slots(3, 2);
  for (int round = 0; round < 6; ++round) {
    StreamSlots::Slot slot = *slots.AcquireAvoiding(0, 1);
    EXPECT_NE(slot.device, 1u);
    slots.Release(slot, 0);
  }
  slots.Disable(0);
  slots.Disable(2);
  StreamSlots::Slot last = *slots.AcquireAvoiding(0, 1);
  EXPECT_EQ(last.device, 1u);
  slots.Release(last, 0);
}

TEST(StreamSlotsTest, WaitsWhileEveryStreamIsBusy) {
  StreamSlots slots(1, 1);
  StreamSlots::Slot only = *slots.Acquire(1);
  absl::Notification acquired;
  std::thread waiter([&] {
    slots.Release(*slots.Acquire(1), 1);
    acquired.Notify();
  });
  EXPECT_FALSE(acquired.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  slots.Release(only, 1);
  EXPECT_TRUE(acquired.WaitForNotificationWithTimeout(absl::Seconds(10)));
  waiter.join();
}

TEST(StreamSlotsTest, ADisabledDeviceGetsNoMoreBatches) {
  StreamSlots slots(2, 2);
  slots.Disable(0);
  EXPECT_EQ(slots.in_service(), 1u);
  for (int i = 0; i < 4; ++i) {
    StreamSlots::Slot slot = *slots.Acquire(0);
    EXPECT_EQ(slot.device, 1u);
    slots.Release(slot, 0);
  }
}

TEST(StreamSlotsTest, WaitersFailOnceNoDeviceIsInService) {
  StreamSlots slots(1, 1);
  StreamSlots::Slot only = *slots.Acquire(1);
  absl::Notification answered;
  absl::Status waiter_status;
  std::thread waiter([&] {
    waiter_status = slots.Acquire(1).status();
    answered.Notify();
  });
  EXPECT_FALSE(answered.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  slots.Disable(0);  // the device failed while the waiter waited
  EXPECT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  waiter.join();
  EXPECT_EQ(waiter_status.code(), absl::StatusCode::kUnavailable);
  slots.Release(only, 1);
  EXPECT_EQ(slots.Acquire(1).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gemm::server
