#include "client/cli/shape_mix.h"

#include "gtest/gtest.h"

namespace gemm::client {
namespace {

TEST(ParseShapeMixTest, ReadsShapesAndWeights) {
  auto shapes = ParseShapeMix("128x128x128:0.7,1024x512x1:0.3,8x8x0");
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  ASSERT_EQ(shapes->size(), 3u);
  EXPECT_EQ((*shapes)[0].problem.m, 128u);
  EXPECT_DOUBLE_EQ((*shapes)[0].weight, 0.7);
  EXPECT_EQ((*shapes)[1].problem.n, 512u);
  EXPECT_EQ((*shapes)[1].problem.k, 1u);
  EXPECT_DOUBLE_EQ((*shapes)[2].weight, 1.0);
}

TEST(ParseShapeMixTest, RejectsMalformedEntries) {
  for (const char* bad : {"", "128x128", "0x1x1", "1x1x1:0", "1x1x1:-2",
                          "axbxc", "1x1x1:0.5:2"}) {
    EXPECT_FALSE(ParseShapeMix(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace gemm::client
