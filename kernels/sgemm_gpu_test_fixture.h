// The fixture of the kernel suites (sgemm_gpu_test*.cc): test problems and
// their operand layouts, operands drawn from a per-process seed (logged),
// the float64 reference (cached by operands), device buffers, and
// SgemmGpuTest, parameterized by kernel name, which runs a problem through
// one kernel and compares. Skips when there is no GPU.
//
// Thread-safety: the reference cache is locked; a fixture is one test's.
//
//   TEST_P(SgemmGpuTest, X) { Run({.m = 33, .n = 17, .k = 9}); }
#ifndef GEMM_KERNELS_SGEMM_GPU_TEST_FIXTURE_H_
#define GEMM_KERNELS_SGEMM_GPU_TEST_FIXTURE_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cuda_presence.h"
#include "kernels/sgemm.h"
#include "kernels/sgemm_launchers.h"

namespace gemm::kernels::gpu_test {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Relative Frobenius error allowed: float32 accumulation over K <= 1000 of
// values in [-1, 1] lands near 1e-7..1e-6.

// One test problem: shape, options and how the operands sit in memory.
struct Problem {
  int m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;
  float alpha = 1.5f, beta = -0.75f;  // beta == 0: C starts as NaN
  int batch_count = 1;
  int64_t pad_a = 0, pad_b = 0, pad_c = 0;  // extra elements per stored row
  int64_t gap = 0;           // extra elements between batch members
  int64_t offset = 0;        // elements from a 256-byte-aligned allocation
  bool broadcast_a = false;  // stride_a = 0 (every member uses the same A)

  std::string ToString() const {
    return absl::StrCat(m, "x", n, "x", k, trans_a ? " At" : "",
                        trans_b ? " Bt" : "", " alpha=", alpha, " beta=", beta,
                        " batch=", batch_count, " pads=", pad_a, ",", pad_b,
                        ",", pad_c, " gap=", gap, " offset=", offset,
                        broadcast_a ? " broadcast_a" : "");
  }
};

// Stored layout of one operand: rows x cols row-major with leading dim ld.
struct Layout {
  int64_t rows, cols, ld, stride, total;
};

inline Layout MakeLayout(int64_t rows, int64_t cols, int64_t pad,
                         const Problem& p, bool broadcast) {
  Layout l;
  l.rows = rows;
  l.cols = cols;
  l.ld = std::max<int64_t>(1, cols + pad);
  const int64_t member = rows * l.ld;
  l.stride = broadcast ? 0 : member + p.gap;
  l.total = p.offset + l.stride * (p.batch_count - 1) + member + 1;
  return l;
}

inline float RandomNonZero(std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(0.1f, 1.f);
  std::bernoulli_distribution sign(0.5);
  return sign(rng) ? dist(rng) : -dist(rng);
}

// This process's random seed: fresh each run, logged so a failure can be
// replayed.
inline uint32_t ProcessSeed() {
  static const uint32_t seed = [] {
    const uint32_t s = std::random_device{}();
    std::fprintf(stderr, "sgemm_gpu_test: operand seed %u\n", s);
    return s;
  }();
  return seed;
}

// Everything that decides A and B (not alpha, beta or C).
inline std::string OperandKey(const Problem& p) {
  return absl::StrCat(p.m, "x", p.n, "x", p.k, "/", p.trans_a, p.trans_b, "/",
                      p.batch_count, "/", p.pad_a, ",", p.pad_b, "/", p.gap,
                      "/", p.offset, "/", p.broadcast_a);
}

inline uint32_t OperandSeed(const Problem& p) {
  return ProcessSeed() ^
         static_cast<uint32_t>(std::hash<std::string>{}(OperandKey(p)));
}

// op(A) * op(B) in float64 for every batch member, dense [z][i][j]; cached
// by OperandKey, since A and B follow from it.
inline std::shared_ptr<const std::vector<double>> Product(
    const Problem& p, const std::vector<float>& a, const Layout& la,
    const std::vector<float>& b, const Layout& lb) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const std::vector<double>>>
      cache;
  const std::string key = OperandKey(p);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  auto product = std::make_shared<std::vector<double>>(
      static_cast<size_t>(p.batch_count) * p.m * p.n, 0.0);
  std::vector<double> op_a(static_cast<size_t>(p.m) * p.k),
      op_b(static_cast<size_t>(p.k) * p.n);
  for (int z = 0; z < p.batch_count; ++z) {
    const int64_t base_a = p.offset + z * la.stride,
                  base_b = p.offset + z * lb.stride;
    for (int i = 0; i < p.m; ++i)
      for (int kk = 0; kk < p.k; ++kk)
        op_a[static_cast<size_t>(i) * p.k + kk] =
            p.trans_a ? a[base_a + kk * la.ld + i] : a[base_a + i * la.ld + kk];
    for (int kk = 0; kk < p.k; ++kk)
      for (int j = 0; j < p.n; ++j)
        op_b[static_cast<size_t>(kk) * p.n + j] =
            p.trans_b ? b[base_b + j * lb.ld + kk] : b[base_b + kk * lb.ld + j];
    double* out = product->data() + static_cast<size_t>(z) * p.m * p.n;
    for (int i = 0; i < p.m; ++i) {
      double* row = out + static_cast<size_t>(i) * p.n;
      for (int kk = 0; kk < p.k; ++kk) {
        const double av = op_a[static_cast<size_t>(i) * p.k + kk];
        const double* brow = op_b.data() + static_cast<size_t>(kk) * p.n;
        for (int j = 0; j < p.n; ++j) row[j] += av * brow[j];
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu);
  return cache.emplace(key, std::move(product)).first->second;
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) {
    EXPECT_EQ(
        cudaMalloc(reinterpret_cast<void**>(&ptr_), count * sizeof(float)),
        cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  float* get() const { return ptr_; }

 private:
  float* ptr_ = nullptr;
};

class SgemmGpuTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const absl::StatusOr<CudaPresence> gpu = ProbeCudaDevices();
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    if (!gpu->present) GTEST_SKIP() << "no GPU: " << gpu->why_absent;
    kernel_ = KernelRegistry::Global().Find(GetParam());
    ASSERT_NE(kernel_, nullptr);
    // v12 (wgmma) runs only on compute capability 9.0.
    if (!kernel_->RunsOnDevice(0)) {
      GTEST_SKIP() << GetParam() << " does not run on this GPU";
    }
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
              cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Runs `p` with fresh random operands and checks every batch member against
  // the float64 reference; also checks that no element outside C's m x n
  // members was written.
  void RunAndCheck(const Problem& p) { RunAndCheck(p, stream_); }

  void RunAndCheck(const Problem& p, cudaStream_t stream) {
    SCOPED_TRACE(p.ToString());
    const Layout la = MakeLayout(p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k,
                                 p.pad_a, p, p.broadcast_a);
    const Layout lb = MakeLayout(p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n,
                                 p.pad_b, p, false);
    const Layout lc = MakeLayout(p.m, p.n, p.pad_c, p, false);

    // A and B depend only on the layout (and this process's seed), so the
    // float64 product is computed once and shared by every kernel and beta.
    std::mt19937 rng(OperandSeed(p));
    std::vector<float> a(la.total), b(lb.total),
        c(lc.total, kNaN);  // padding stays NaN
    for (float& v : a) v = RandomNonZero(rng);
    for (float& v : b) v = RandomNonZero(rng);
    auto c_at = [&](int z, int64_t i, int64_t j) -> float& {
      return c[p.offset + z * lc.stride + i * lc.ld + j];
    };
    if (p.beta != 0.f) {
      std::mt19937 c_rng(std::random_device{}());
      for (int z = 0; z < p.batch_count; ++z)
        for (int i = 0; i < p.m; ++i)
          for (int j = 0; j < p.n; ++j) c_at(z, i, j) = RandomNonZero(c_rng);
    }
    const std::vector<float> c_before = c;

    DeviceBuffer da(la.total), db(lb.total), dc(lc.total);
    ASSERT_EQ(cudaMemcpy(da.get(), a.data(), a.size() * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(db.get(), b.data(), b.size() * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dc.get(), c.data(), c.size() * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);

    SgemmArgs args;
    args.m = p.m;
    args.n = p.n;
    args.k = p.k;
    args.trans_a = p.trans_a;
    args.trans_b = p.trans_b;
    args.alpha = p.alpha;
    args.beta = p.beta;
    args.a = da.get() + p.offset;
    args.lda = la.ld;
    args.b = db.get() + p.offset;
    args.ldb = lb.ld;
    args.c = dc.get() + p.offset;
    args.ldc = lc.ld;
    args.batch_count = p.batch_count;
    args.stride_a = la.stride;
    args.stride_b = lb.stride;
    args.stride_c = lc.stride;
    ASSERT_TRUE(kernel_->CanImplement(args).ok())
        << kernel_->CanImplement(args);
    const absl::Status status = kernel_->Launch(args, stream);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(c.data(), dc.get(), c.size() * sizeof(float),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);

    const std::shared_ptr<const std::vector<double>> product =
        Product(p, a, la, b, lb);
    std::vector<bool> in_c(c.size(), false);
    int64_t unwritten = 0;
    for (int z = 0; z < p.batch_count; ++z) {
      // The error is measured against the size of the two terms added,
      // alpha * AB and beta * C, not of their sum: where they cancel (a
      // 1x1x1 job can land near 0) float32's rounding of each term is what
      // remains, however right the kernel.
      double diff2 = 0, ref2 = 0;
      for (int i = 0; i < p.m; ++i) {
        for (int j = 0; j < p.n; ++j) {
          const int64_t idx = p.offset + z * lc.stride + i * lc.ld + j;
          in_c[idx] = true;
          const double ab =
              static_cast<double>(p.alpha) *
              (*product)[(static_cast<int64_t>(z) * p.m + i) * p.n + j];
          const double bc =
              p.beta != 0.f ? static_cast<double>(p.beta) * c_before[idx] : 0.0;
          const double ref = ab + bc;
          const double scale = std::abs(ab) + std::abs(bc);
          if (!std::isfinite(c[idx])) ++unwritten;
          diff2 += (c[idx] - ref) * (c[idx] - ref);
          ref2 += scale * scale;
        }
      }
      if (ref2 == 0) {
        EXPECT_EQ(diff2, 0) << "batch member " << z;
      } else {
        // Relative error allowed by the kernel's arithmetic: float32
        // throughout, or inputs rounded to TF32 or BF16 before the sums.
        EXPECT_LE(std::sqrt(diff2 / ref2),
                  VerifyTolerance(kernel_->precision()))
            << "batch member " << z;
      }
    }
    EXPECT_EQ(unwritten, 0)
        << "elements of C left NaN (unwritten) or non-finite";
    int64_t touched = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      if (!in_c[i] && !std::isnan(c[i])) ++touched;
    }
    EXPECT_EQ(touched, 0) << "elements outside C's members were written";
  }

  // Each m x n x k shape with all four transpose pairs, and with beta -0.75
  // and beta 0 (C poisoned with NaN).
  void RunEveryTransposeAndBeta(const std::vector<std::array<int, 3>>& shapes) {
    for (const auto& s : shapes) {
      for (int t = 0; t < 4; ++t) {
        for (float beta : {-0.75f, 0.f}) {
          Problem p;
          p.m = s[0];
          p.n = s[1];
          p.k = s[2];
          p.trans_a = t & 1;
          p.trans_b = t & 2;
          p.alpha = beta == 0.f ? 0.5f : 1.5f;
          p.beta = beta;
          RunAndCheck(p);
        }
      }
    }
  }

  const SgemmKernel* kernel_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace gemm::kernels::gpu_test

#endif  // GEMM_KERNELS_SGEMM_GPU_TEST_FIXTURE_H_
