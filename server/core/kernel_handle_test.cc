#include "server/core/kernel_handle.h"

#include "gtest/gtest.h"

namespace gemm::server {
namespace {

TEST(KernelTableTest, FindsEachKernelByNameOnceAndByIndexAfter) {
  const KernelTable table({{"v6", Precision::kFp32, "warp tiling"},
                           {"v12", Precision::kFp32Tensor, "3xTF32"}});
  ASSERT_EQ(table.size(), 2);
  const KernelHandle v12 = table.Find("v12");
  ASSERT_TRUE(v12.valid());
  EXPECT_EQ(v12.name(), "v12");
  EXPECT_EQ(v12.precision(), Precision::kFp32Tensor);
  EXPECT_EQ(table.IndexOf(v12), 1);
  EXPECT_EQ(table.at(1), v12);
  EXPECT_NE(table.Find("v6"), v12);
  EXPECT_EQ(table.names(), (std::vector<std::string>{"v6", "v12"}));
  EXPECT_EQ(table.descriptions()[0].description, "warp tiling");
}

TEST(KernelTableTest, UnknownNamesAndForeignHandlesResolveToNothing) {
  const KernelTable table({{"cpu"}});
  const KernelTable other({{"cpu"}});
  EXPECT_FALSE(table.Find("v9").valid());
  EXPECT_EQ(table.Find("v9").name(), "");
  // Same name, another table: not this table's kernel.
  EXPECT_EQ(table.IndexOf(other.Find("cpu")), -1);
  EXPECT_NE(table.Find("cpu"), other.Find("cpu"));
  EXPECT_EQ(table.IndexOf(KernelHandle()), -1);
}

}  // namespace
}  // namespace gemm::server
