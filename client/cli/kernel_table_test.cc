#include "client/cli/kernel_table.h"

#include "gtest/gtest.h"

namespace gemm::client {
namespace {

// Each kernel of `gemm-client kernels` runs in the arithmetic Info gives
// it: the server refuses a 3xTF32 kernel (v9, v12) for a float32 job, so
// the table must ask for fp32-tensor there.
TEST(KernelTableTest, EachKernelRunsInItsOwnPrecision) {
  EXPECT_EQ(PrecisionToRun("fp32"), v1::PRECISION_FP32);
  EXPECT_EQ(PrecisionToRun("fp32-tensor"), v1::PRECISION_FP32_TENSOR);
  EXPECT_EQ(PrecisionToRun("tf32"), v1::PRECISION_TF32);
  EXPECT_EQ(PrecisionToRun("bf16"), v1::PRECISION_BF16);
  // A server from before kernel_details names no precision: float32.
  EXPECT_EQ(PrecisionToRun(""), v1::PRECISION_FP32);
}

}  // namespace
}  // namespace gemm::client
