#include "server/cuda/shape_tuner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace gemm::server {
namespace {

// Times by rule: "split" is fastest when k is much larger than m and n,
// "tiles" otherwise, and "slow" never wins. "picky" cannot run odd shapes.
absl::StatusOr<double> RuleTimes(const std::string& kernel,
                                 const GemmProblem& shape) {
  const bool deep = shape.k >= 8 * std::max(shape.m, shape.n);
  if (kernel == "split") return deep ? 1.0 : 3.0;
  if (kernel == "tiles") return deep ? 2.0 : 1.5;
  if (kernel == "picky") {
    if (shape.m % 2 != 0) return absl::InvalidArgumentError("odd m");
    return 0.5;
  }
  return 9.0;
}

const std::vector<std::string> kKernels = {"slow", "tiles", "split", "picky"};
const std::vector<bool> kAll = {true, true, true, true};

TEST(ShapeTunerTest, FirstUseQueuesTheShapeAndLaterUsesGetItsFastest) {
  ShapeTuner tuner(kKernels, ShapeTuner::EachKernel(RuleTimes), {});
  const GemmProblem deep{.m = 63, .n = 65, .k = 8191};
  EXPECT_EQ(tuner.Lookup(deep, kAll), "");
  tuner.WaitIdle();
  // picky cannot run m = 63; split is the fastest of the rest.
  EXPECT_EQ(tuner.Lookup(deep, kAll), "split");
  // The mask: without split, tiles.
  EXPECT_EQ(tuner.Lookup(deep, {true, true, false, true}), "tiles");
  // A mask shorter than the kernels leaves the rest out.
  EXPECT_EQ(tuner.Lookup(deep, {true}), "slow");
  // None allowed: no choice.
  EXPECT_EQ(tuner.Lookup(deep, {false, false, false, false}), "");
  ASSERT_EQ(tuner.tuned().size(), 1u);
  EXPECT_EQ(tuner.tuned()[0].ms, (std::vector<double>{9.0, 2.0, 1.0, -1.0}));
}

TEST(ShapeTunerTest, EachShapeIsMeasuredOnceAndKeyedByItsDimensions) {
  std::atomic<int> calls{0};
  ShapeTuner tuner(kKernels,
                   ShapeTuner::EachKernel([&calls](const std::string& kernel,
                                                   const GemmProblem& shape) {
                     ++calls;
                     return RuleTimes(kernel, shape);
                   }),
                   {});
  const GemmProblem even{.m = 64, .n = 64, .k = 64};
  for (int i = 0; i < 5; ++i) tuner.Lookup(even, kAll);
  tuner.WaitIdle();
  EXPECT_EQ(calls.load(), 4);  // one shape, four kernels
  EXPECT_EQ(tuner.Lookup(even, kAll), "picky");
  // The same m and n with another k is another shape.
  EXPECT_EQ(tuner.Lookup({.m = 64, .n = 64, .k = 4096}, kAll), "");
  tuner.WaitIdle();
  EXPECT_EQ(calls.load(), 8);
  EXPECT_EQ(
      tuner.Lookup({.m = 64, .n = 64, .k = 4096}, {true, true, true, false}),
      "split");
}

TEST(ShapeTunerTest, ShapesBeyondTheCapKeepTheTablesChoice) {
  std::atomic<int> calls{0};
  ShapeTuner tuner(kKernels,
                   ShapeTuner::EachKernel([&calls](const std::string& kernel,
                                                   const GemmProblem& shape) {
                     ++calls;
                     return RuleTimes(kernel, shape);
                   }),
                   {.max_shapes = 2});
  for (uint32_t m : {10u, 20u, 30u, 40u}) tuner.Lookup({m, 64, 64}, kAll);
  tuner.WaitIdle();
  EXPECT_EQ(calls.load(), 8);
  EXPECT_EQ(tuner.Lookup({20, 64, 64}, kAll), "picky");
  EXPECT_EQ(tuner.Lookup({30, 64, 64}, kAll), "");
  EXPECT_EQ(tuner.tuned().size(), 2u);
}

TEST(ShapeTunerTest, KernelsAMeasureLeavesOutCountAsFailed) {
  ShapeTuner tuner(
      kKernels,
      [](const GemmProblem&, const std::vector<std::string>&) {
        return std::vector<double>{3.0, 2.0};  // slow, tiles; no more
      },
      {});
  tuner.Lookup({64, 64, 64}, kAll);
  tuner.WaitIdle();
  EXPECT_EQ(tuner.Lookup({64, 64, 64}, kAll), "tiles");
  EXPECT_EQ(tuner.Lookup({64, 64, 64}, {false, false, true, true}), "");
}

TEST(ShapeTunerTest, LookupsDoNotWaitForAMeasurement) {
  absl::Notification measuring, release;
  ShapeTuner tuner(kKernels,
                   ShapeTuner::EachKernel([&](const std::string& kernel,
                                              const GemmProblem& shape) {
                     if (!measuring.HasBeenNotified()) measuring.Notify();
                     release.WaitForNotification();
                     return RuleTimes(kernel, shape);
                   }),
                   {});
  EXPECT_EQ(tuner.Lookup({64, 64, 64}, kAll), "");
  measuring.WaitForNotification();
  // The tuner's thread is inside a measurement: lookups answer at once,
  // from what is measured (nothing yet).
  EXPECT_EQ(tuner.Lookup({64, 64, 64}, kAll), "");
  EXPECT_EQ(tuner.Lookup({128, 64, 64}, kAll), "");
  release.Notify();
  tuner.WaitIdle();
  EXPECT_EQ(tuner.Lookup({128, 64, 64}, kAll), "picky");
}

TEST(ShapeTunerTest, DestroyingItWithShapesQueuedEndsPromptly) {
  std::atomic<int> calls{0};
  {
    ShapeTuner tuner(
        kKernels,
        ShapeTuner::EachKernel(
            [&calls](const std::string& kernel, const GemmProblem& shape) {
              // A measurement takes the GPU's time: 200 shapes take 0.8 s.
              std::this_thread::sleep_for(std::chrono::milliseconds(1));
              ++calls;
              return RuleTimes(kernel, shape);
            }),
        {});
    for (uint32_t m = 1; m <= 200; ++m) tuner.Lookup({m, 64, 64}, kAll);
  }
  // Stopped between shapes: not all 200 were measured, and each one begun
  // was finished (whole shapes only).
  EXPECT_LT(calls.load(), 800);
  EXPECT_EQ(calls.load() % 4, 0);
}

}  // namespace
}  // namespace gemm::server
