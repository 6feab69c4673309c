// Every registered kernel, single and batched, against a float64 CPU
// reference: odd shapes, K = 0, all transposes, alpha/beta, NaN-poisoned C
// with beta = 0, padded and misaligned operands (v5's scalar fallback), more
// batch members than one grid holds, and launches from several threads.
// Skips when there is no GPU.// Here odd shapes, skinny and deep-K problems,
// the same bits on every run and K = 0; sgemm_gpu_test_layouts.cc has padded
// and misaligned operands, batches and threads. The fixture:
// sgemm_gpu_test_fixture.h.
#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/sgemm.h"
#include "kernels/sgemm_gpu_test_fixture.h"

namespace gemm::kernels::gpu_test {
namespace {

TEST_P(SgemmGpuTest, OddShapesEveryTransposeAndBeta) {
  RunEveryTransposeAndBeta({{1, 1, 1},
                            {2, 3, 5},
                            {7, 11, 13},
                            {31, 33, 17},
                            {67, 129, 131},
                            {130, 127, 9},
                            {257, 131, 33},
                            {129, 257, 8}});
}

// Skinny and deep-K problems: the shapes split-K kernels cut K for (v8,
// v11), N under 16 (v11's thin tiles), and K ranges that end mid-slice.
// 517x12x2000 and 300x16x4096 keep every leading dimension a multiple of
// 4 (16-byte copies; at n = 12 the last quad of v11's 16-wide tiles lies
// wholly past N and is zero-filled).
TEST_P(SgemmGpuTest, SkinnyAndDeepK) {
  RunEveryTransposeAndBeta({{13, 9, 4099},
                            {517, 5, 2000},
                            {3, 300, 3001},
                            {70, 70, 2500},
                            {517, 12, 2000},
                            {300, 16, 4096}});
}

// Split K over several batch members: each member's splits and sum.
TEST_P(SgemmGpuTest, SkinnyBatched) {
  for (int t = 0; t < 4; ++t) {
    Problem p;
    p.m = 70;
    p.n = 68;
    p.k = 2500;
    p.trans_a = t & 1;
    p.trans_b = t & 2;
    p.batch_count = 3;
    p.gap = 4;
    RunAndCheck(p);
  }
}

// The same inputs give the same bits on every run, including the split-K
// shapes (v11 sums its splits in a fixed order). v8 is the exception: it
// adds its splits into C with atomics, in the order they arrive, so its
// runs need only agree to float32's rounding.
TEST_P(SgemmGpuTest, SameBitsOnEveryRun) {
  const bool bitwise = GetParam() != "v8";
  for (const auto& s :
       {std::array<int, 3>{517, 5, 2000}, std::array<int, 3>{70, 70, 2500},
        std::array<int, 3>{16, 1000, 3000}}) {
    const int m = s[0], n = s[1], k = s[2];
    SCOPED_TRACE(absl::StrCat(m, "x", n, "x", k));
    std::mt19937 rng(ProcessSeed() + m);
    std::vector<float> a(int64_t{m} * k), b(int64_t{k} * n), c(int64_t{m} * n);
    for (float& v : a) v = RandomNonZero(rng);
    for (float& v : b) v = RandomNonZero(rng);
    for (float& v : c) v = RandomNonZero(rng);
    DeviceBuffer da(a.size()), db(b.size()), dc(c.size());
    ASSERT_EQ(cudaMemcpy(da.get(), a.data(), a.size() * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(db.get(), b.data(), b.size() * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    SgemmArgs args;
    args.m = m;
    args.n = n;
    args.k = k;
    args.alpha = 1.25f;
    args.beta = 0.5f;
    args.a = da.get();
    args.lda = k;
    args.b = db.get();
    args.ldb = n;
    args.c = dc.get();
    args.ldc = n;
    std::vector<float> first;
    for (int run = 0; run < 3; ++run) {
      ASSERT_EQ(cudaMemcpy(dc.get(), c.data(), c.size() * sizeof(float),
                           cudaMemcpyHostToDevice),
                cudaSuccess);
      const absl::Status status = kernel_->Launch(args, stream_);
      ASSERT_TRUE(status.ok()) << status;
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      std::vector<float> out(c.size());
      ASSERT_EQ(cudaMemcpy(out.data(), dc.get(), out.size() * sizeof(float),
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      if (run == 0) {
        first = out;
      } else if (bitwise) {
        EXPECT_EQ(
            std::memcmp(first.data(), out.data(), out.size() * sizeof(float)),
            0)
            << "run " << run << " differs from the first";
      } else {
        double diff2 = 0, ref2 = 0;
        for (size_t i = 0; i < out.size(); ++i) {
          const double d = double{out[i]} - first[i];
          diff2 += d * d;
          ref2 += double{first[i]} * first[i];
        }
        EXPECT_LE(std::sqrt(diff2 / ref2), 1e-6) << "run " << run;
      }
    }
  }
}

TEST_P(SgemmGpuTest, KZeroScalesC) {
  for (float beta : {0.5f, 0.f}) {
    Problem p;
    p.m = 5;
    p.n = 7;
    p.k = 0;
    p.beta = beta;
    RunAndCheck(p);
  }
}

TEST_P(SgemmGpuTest, KZeroWithNullOperands) {
  DeviceBuffer dc(6);
  std::vector<float> c = {1, 2, 3, 4, 5, 6};
  ASSERT_EQ(
      cudaMemcpy(dc.get(), c.data(), 6 * sizeof(float), cudaMemcpyHostToDevice),
      cudaSuccess);
  SgemmArgs args;
  args.m = 2;
  args.n = 3;
  args.k = 0;
  args.beta = 2.f;
  args.c = dc.get();
  args.ldc = 3;
  const absl::Status status = kernel_->Launch(args, stream_);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_EQ(
      cudaMemcpy(c.data(), dc.get(), 6 * sizeof(float), cudaMemcpyDeviceToHost),
      cudaSuccess);
  EXPECT_EQ(c, (std::vector<float>{2, 4, 6, 8, 10, 12}));
}

}  // namespace
}  // namespace gemm::kernels::gpu_test
