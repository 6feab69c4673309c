// Every registered kernel against a float64 CPU reference (the suite:
// sgemm_gpu_test.cc, fixture sgemm_gpu_test_fixture.h): a large odd shape,
// padded and misaligned operands, batches (more members than one grid
// holds), launches from several threads; the instantiation over every
// kernel, and v5's vector-access rule.
#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/sgemm.h"
#include "kernels/sgemm_gpu_test_fixture.h"

namespace gemm::kernels::gpu_test {
namespace {

TEST_P(SgemmGpuTest, LargeOddShape) {
  for (int t : {0, 3}) {
    for (float beta : {2.f, 0.f}) {
      Problem p;
      p.m = 1000;
      p.n = 999;
      p.k = 777;
      p.trans_a = t & 1;
      p.trans_b = t & 2;
      p.alpha = 0.5f;
      p.beta = beta;
      RunAndCheck(p);
    }
  }
}

TEST_P(SgemmGpuTest, PaddedAndMisalignedOperands) {
  // Padding by multiples of 4 keeps v5's float4 path; odd padding, odd gaps
  // and pointers off by one float force its scalar instantiation.
  const int64_t pads[][4] = {
      {4, 8, 12, 0}, {1, 2, 3, 0}, {0, 0, 0, 1}, {3, 0, 5, 2}};
  for (const auto& pad : pads) {
    for (int t = 0; t < 4; ++t) {
      Problem p;
      p.m = 133;
      p.n = 140;
      p.k = 67;
      p.trans_a = t & 1;
      p.trans_b = t & 2;
      p.pad_a = pad[0];
      p.pad_b = pad[1];
      p.pad_c = pad[2];
      p.offset = pad[3];
      p.beta = t % 2 == 0 ? 0.f : 1.25f;
      RunAndCheck(p);
    }
  }
}

TEST_P(SgemmGpuTest, Batched) {
  for (int t = 0; t < 4; ++t) {
    for (int64_t gap : {0, 3, 4}) {
      Problem p;
      p.m = 37;
      p.n = 45;
      p.k = 29;
      p.trans_a = t & 1;
      p.trans_b = t & 2;
      p.batch_count = 5;
      p.gap = gap;
      p.beta = gap == 3 ? 0.f : 0.25f;
      RunAndCheck(p);
    }
  }
  Problem p;  // aligned members, one A for all of them
  p.m = 64;
  p.n = 132;
  p.k = 40;
  p.batch_count = 3;
  p.broadcast_a = true;
  RunAndCheck(p);
}

TEST_P(SgemmGpuTest, MoreBatchMembersThanOneGridHolds) {
  Problem p;  // gridDim.z is at most 65535
  p.m = 2;
  p.n = 3;
  p.k = 4;
  p.batch_count = 70000;
  p.beta = 0.f;
  RunAndCheck(p);
}

TEST_P(SgemmGpuTest, LaunchesFromSeveralThreads) {
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([this, i] {
      cudaStream_t stream = nullptr;
      ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                cudaSuccess);
      Problem p;
      p.m = 150 + i;
      p.n = 141;
      p.k = 99;
      p.batch_count = 2;
      for (int repeat = 0; repeat < 3; ++repeat) RunAndCheck(p, stream);
      cudaStreamDestroy(stream);
    });
  }
  for (std::thread& t : threads) t.join();
}

INSTANTIATE_TEST_SUITE_P(AllKernels, SgemmGpuTest,
                         ::testing::ValuesIn(KernelRegistry::Global().Names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           // Test names take letters, digits and '_' only
                           // ("v7-64x64").
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// v5 picks its float4 instantiation only where alignment allows it.
TEST(SgemmVectorAccessTest, FollowsAlignment) {
  alignas(16) static float buffer[64];
  SgemmArgs args;
  args.m = args.n = args.k = 4;
  args.a = buffer;
  args.b = buffer;
  args.c = buffer;
  args.lda = args.ldb = args.ldc = 4;
  EXPECT_TRUE(SgemmVectorAccessAllowed(args));
  args.lda = 5;
  EXPECT_FALSE(SgemmVectorAccessAllowed(args));
  args.lda = 4;
  args.c = buffer + 1;
  EXPECT_FALSE(SgemmVectorAccessAllowed(args));
  args.c = buffer;
  args.batch_count = 2;
  args.stride_b = 18;
  args.stride_c = 16;
  EXPECT_FALSE(SgemmVectorAccessAllowed(args));
  args.stride_b = 16;
  EXPECT_TRUE(SgemmVectorAccessAllowed(args));
}

}  // namespace
}  // namespace gemm::kernels::gpu_test
