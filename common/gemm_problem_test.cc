#include "common/gemm_problem.h"

#include "gtest/gtest.h"

namespace gemm {
namespace {

TEST(GemmProblemTest, SizesFollowTheTransposes) {
  GemmProblem p{.m = 3, .n = 5, .k = 7};
  EXPECT_EQ(p.a_elements(), 21u);
  EXPECT_EQ(p.b_elements(), 35u);
  EXPECT_EQ(p.c_elements(), 15u);
  EXPECT_EQ(p.total_bytes(), 4u * (21 + 35 + 15));
  EXPECT_EQ(p.lda(), 7u);
  EXPECT_EQ(p.ldb(), 5u);
  EXPECT_EQ(p.ldc(), 5u);
  p.trans_a = p.trans_b = true;
  EXPECT_EQ(p.lda(), 3u);
  EXPECT_EQ(p.ldb(), 7u);
  EXPECT_DOUBLE_EQ(p.flops(), 2.0 * 3 * 5 * 7);
}

TEST(GemmProblemTest, LeadingDimensionsAreAtLeastOneWhenKIsZero) {
  GemmProblem p{.m = 4, .n = 6, .k = 0};
  EXPECT_EQ(p.lda(), 1u);
  EXPECT_EQ(p.ldb(), 6u);
  p.trans_b = true;
  EXPECT_EQ(p.ldb(), 1u);
}

TEST(GemmProblemTest, LargestDimensionsDoNotWrapElementCounts) {
  GemmProblem p{.m = 0xffffffffu, .n = 0xffffffffu, .k = 2};
  EXPECT_EQ(p.c_elements(), uint64_t{0xffffffffu} * 0xffffffffu);
}

TEST(GemmProblemTest, TotalBytesSaturatesInsteadOfWrapping) {
  // 4 * 3 * 2^62 wraps to 0 modulo 2^64.
  GemmProblem p{.m = 1u << 31, .n = 1u << 31, .k = 1u << 31};
  EXPECT_EQ(p.total_bytes(), UINT64_MAX);
  GemmProblem q{.m = 0xffffffffu, .n = 0xffffffffu, .k = 0xffffffffu};
  EXPECT_EQ(q.total_bytes(), UINT64_MAX);
  GemmProblem r{.m = 1u << 16, .n = 1u << 16, .k = 1u << 16};
  EXPECT_EQ(r.total_bytes(), 12ull << 32);
}

TEST(GemmProblemTest, ToStringNamesTransposes) {
  GemmProblem p{.m = 1000, .n = 999, .k = 777};
  EXPECT_EQ(p.ToString(), "1000x999x777");
  p.trans_a = true;
  p.trans_b = true;
  EXPECT_EQ(p.ToString(), "1000x999x777 A^T B^T");
}

TEST(GemmProblemTest, SameShapeIgnoresScalars) {
  GemmProblem p{.m = 2, .n = 3, .k = 4, .alpha = 2.0f};
  GemmProblem q{.m = 2, .n = 3, .k = 4, .beta = 1.0f};
  EXPECT_TRUE(p.SameShapeAs(q));
  q.trans_b = true;
  EXPECT_FALSE(p.SameShapeAs(q));
}

}  // namespace
}  // namespace gemm
