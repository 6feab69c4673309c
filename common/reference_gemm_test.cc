#include "common/reference_gemm.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace gemm {
namespace {

TEST(ReferenceGemmTest, SmallHandComputedCase) {
  // A = [1 2; 3 4], B = [5 6; 7 8], C = [1 1; 1 1].
  const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8}, c[] = {1, 1, 1, 1};
  GemmProblem spec{2, 2, 2, false, false, 2.0f, 0.5f};
  std::vector<double> got = ReferenceGemm(spec, a, b, c);
  EXPECT_EQ(got, (std::vector<double>{38.5, 44.5, 86.5, 100.5}));
  // The same with both stored transposed.
  const float at[] = {1, 3, 2, 4}, bt[] = {5, 7, 6, 8};
  spec.trans_a = spec.trans_b = true;
  EXPECT_EQ(ReferenceGemm(spec, at, bt, c), got);
}

TEST(ReferenceGemmTest, ZeroKGivesBetaTimesC) {
  const float c[] = {2, -4, 8};
  GemmProblem spec{1, 3, 0, false, false, 1.0f, -0.5f};
  EXPECT_EQ(ReferenceGemm(spec, nullptr, nullptr, c),
            (std::vector<double>{-1, 2, -4}));
}

TEST(ReferenceGemmTest, ErrorCatchesWrongAndUnwrittenValues) {
  std::vector<double> want = {1, 2, 3, 4};
  std::vector<float> got = {1, 2, 3, 4};
  EXPECT_EQ(RelativeFrobeniusError(got.data(), want), 0.0);
  got[2] = 3.001f;
  EXPECT_GT(RelativeFrobeniusError(got.data(), want), 1e-5);
  got[2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isinf(RelativeFrobeniusError(got.data(), want)));
}

TEST(ReferenceGemmTest, RandomFillIsNeverZeroAndDependsOnSeed) {
  std::vector<float> x(10000), y(10000);
  FillRandom(x.data(), x.size(), 7);
  FillRandom(y.data(), y.size(), 8);
  int negatives = 0;
  for (float v : x) {
    EXPECT_GE(std::fabs(v), 1.0f / 64);
    EXPECT_LE(std::fabs(v), 1.0f);
    negatives += v < 0;
  }
  EXPECT_GT(negatives, 4000);
  EXPECT_LT(negatives, 6000);
  EXPECT_NE(x, y);
}

}  // namespace
}  // namespace gemm
