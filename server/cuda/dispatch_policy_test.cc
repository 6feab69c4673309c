#include "server/cuda/dispatch_policy.h"

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace gemm::server {
namespace {

// A fake GPU: "small" wins below 512 in every dimension, "big" above.
absl::StatusOr<double> FakeMeasure(const std::string& kernel, uint32_t m,
                                   uint32_t n, uint32_t k) {
  const bool small = m < 512 && n < 512 && k < 512;
  const double base = 1e-6 * m * n * k;
  return kernel == "small" ? base * (small ? 1.0 : 2.0)
                           : base * (small ? 2.0 : 1.0);
}

GemmProblem Shape(uint32_t m, uint32_t n, uint32_t k) {
  return GemmProblem{m, n, k};
}

TEST(DispatchPolicyTest, ChoosesTheFastestKernelOfTheRegion) {
  auto policy = DispatchPolicy::Calibrate("fake", {"small", "big"},
                                          {64, 256, 1024, 4096}, FakeMeasure);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->entries().size(), 64u);
  EXPECT_EQ(policy->Choose(Shape(64, 64, 64)), "small");
  EXPECT_EQ(policy->Choose(Shape(300, 200, 100)), "small");
  EXPECT_EQ(policy->Choose(Shape(4096, 4096, 4096)), "big");
  EXPECT_EQ(policy->Choose(Shape(1000, 999, 777)), "big");
  // Beyond the grid: the nearest corner.
  EXPECT_EQ(policy->Choose(Shape(1, 2, 3)), "small");
  EXPECT_EQ(policy->Choose(Shape(20000, 1, 1)), "big");
  EXPECT_EQ(policy->Choose(Shape(20000, 20000, 20000)), "big");
}

// "steady" takes 1 ms everywhere; "rising" grows log-linearly with m from
// 0.5 ms at 64 to 1.6 ms at 256, so that the two cross at m of about 146,
// between the grid points.
absl::StatusOr<double> CrossingMeasure(const std::string& kernel, uint32_t m,
                                       uint32_t, uint32_t) {
  if (kernel == "steady") return 1.0;
  const double t = (std::log2(double(m)) - 6) / 2;  // 0 at 64, 1 at 256
  return std::exp(std::log(0.5) + t * std::log(3.2));
}

TEST(DispatchPolicyTest, InterpolatesBetweenGridPoints) {
  auto policy = DispatchPolicy::Calibrate("fake", {"steady", "rising"},
                                          {64, 256}, CrossingMeasure);
  ASSERT_TRUE(policy.ok()) << policy.status();
  // m = 140 is nearer 256 in log2, where "steady" wins; between the points
  // "rising" is still the faster, and interpolation sees it.
  EXPECT_EQ(policy->Choose(Shape(140, 64, 64)), "rising");
  EXPECT_EQ(policy->Choose(Shape(100, 200, 64)), "rising");
  EXPECT_EQ(policy->Choose(Shape(160, 64, 64)), "steady");
  EXPECT_EQ(policy->Choose(Shape(256, 64, 256)), "steady");
  // Beyond the grid: its edge.
  EXPECT_EQ(policy->Choose(Shape(1, 1, 1)), "rising");
  EXPECT_EQ(policy->Choose(Shape(8192, 8192, 8192)), "steady");
}

TEST(DispatchPolicyTest, ChoosesOnlyAmongAllowedKernels) {
  // "big" wins above 512; with it left out, "small" is the choice there.
  auto policy = DispatchPolicy::Calibrate("fake", {"small", "big"},
                                          {64, 256, 1024, 4096}, FakeMeasure);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->Choose(Shape(4096, 4096, 4096), {true, false}), "small");
  EXPECT_EQ(policy->Choose(Shape(64, 64, 64), {false, true}), "big");
  EXPECT_EQ(policy->Choose(Shape(4096, 4096, 4096), {true, true}), "big");
  // A shorter mask leaves the rest out; none allowed: no choice.
  EXPECT_EQ(policy->Choose(Shape(4096, 4096, 4096), {true}), "small");
  EXPECT_EQ(policy->Choose(Shape(64, 64, 64), {false, false}), "");
  EXPECT_EQ(policy->Choose(Shape(64, 64, 64), {}), "");

  // The nearest-point path (a table that is not a full grid) obeys it too.
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/partial.tsv";
  {
    std::ofstream out(path);
    out << "# gemm-server dispatch table "
           "v1\ndevice\tfake\nkernels\tsmall\tbig\n"
        << "64\t64\t64\t1.0\t2.0\n4096\t4096\t4096\t3.0\t1.0\n";
  }
  auto partial = DispatchPolicy::Load(path, "fake", {"small", "big"});
  ASSERT_TRUE(partial.ok()) << partial.status();
  EXPECT_EQ(partial->Choose(Shape(4000, 4000, 4000)), "big");
  EXPECT_EQ(partial->Choose(Shape(4000, 4000, 4000), {true, false}), "small");
  EXPECT_EQ(partial->Choose(Shape(70, 70, 70), {false, true}), "big");
}

TEST(DispatchPolicyTest, FixedAlwaysPicksItsKernel) {
  DispatchPolicy policy = DispatchPolicy::Fixed("cublas");
  EXPECT_EQ(policy.Choose(Shape(7, 7, 7)), "cublas");
  EXPECT_EQ(policy.origin(), "fixed");
}

TEST(DispatchPolicyTest, MeasurementErrorsFailCalibration) {
  auto policy =
      DispatchPolicy::Calibrate("fake", {"a"}, {64},
                                [](const std::string&, uint32_t, uint32_t,
                                   uint32_t) -> absl::StatusOr<double> {
                                  return absl::InternalError("boom");
                                });
  EXPECT_EQ(policy.status().code(), absl::StatusCode::kInternal);
}

TEST(DispatchPolicyTest, SavesAndLoads) {
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR")
                                             : "/tmp") +
      "/dispatch_table.tsv";
  auto policy = DispatchPolicy::Calibrate("fake GPU", {"small", "big"},
                                          {64, 1024}, FakeMeasure);
  ASSERT_TRUE(policy.ok());
  ASSERT_TRUE(policy->Save(path).ok());

  auto loaded = DispatchPolicy::Load(path, "fake GPU", {"small", "big"});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->entries().size(), policy->entries().size());
  EXPECT_EQ(loaded->Choose(Shape(64, 64, 64)), "small");
  EXPECT_EQ(loaded->Choose(Shape(2000, 2000, 2000)), "big");
  EXPECT_NE(loaded->origin().find(path), std::string::npos);

  EXPECT_EQ(
      DispatchPolicy::Load(path, "other GPU", {"small", "big"}).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      DispatchPolicy::Load(path, "fake GPU", {"v5", "cublas"}).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(DispatchPolicy::Load(path + ".absent", "fake GPU", {"small"})
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  std::ofstream(path) << "garbage\n";
  EXPECT_EQ(
      DispatchPolicy::Load(path, "fake GPU", {"small", "big"}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gemm::server
