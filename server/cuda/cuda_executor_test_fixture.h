// The fixture of the CudaExecutor tests (cuda_executor_test*.cc): one
// executor for the suite on the real GPU (skipping, with the reason, only
// where the host has no CUDA device), jobs with random operands and a
// poisoned C, and a batch run checked against the float64 reference.
//
// Thread-safety: one test thread; the executor is the suite's.
//
//   TEST_F(CudaExecutorTest, X) {
//     std::vector<TestJob> jobs = {MakeJob(nullptr, Shape(7, 9, 11), "auto",
//                                          1, 0, 1)};
//     RunAndCheck(jobs);
//   }
#ifndef GEMM_SERVER_CUDA_CUDA_EXECUTOR_TEST_FIXTURE_H_
#define GEMM_SERVER_CUDA_CUDA_EXECUTOR_TEST_FIXTURE_H_

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/reference_gemm.h"
#include "gtest/gtest.h"
#include "kernels/cuda_presence.h"
#include "server/cuda/cuda_executor.h"

namespace gemm::server::cuda_test {

inline constexpr double kTolerance = 1e-5;

// What a job's result may be off by, from the arithmetic that ran it.
inline double ToleranceOf(const GemmJob& job) {
  return VerifyTolerance(job.timing().precision);
}

inline GemmProblem Shape(uint32_t m, uint32_t n, uint32_t k, bool ta = false,
                         bool tb = false) {
  return GemmProblem{m, n, k, ta, tb};
}

// A job with random A and B; C random when beta != 0, else NaN (beta == 0
// must not read it). The output C is therefore poisoned either way: every
// element must be written.
struct TestJob {
  std::shared_ptr<GemmJob> job;
  std::vector<double> want;
};

inline TestJob MakeJob(HostAllocator* allocator, GemmProblem shape,
                       KernelHandle kernel, float alpha, float beta,
                       uint64_t seed) {
  shape.alpha = alpha;
  shape.beta = beta;
  TestJob t;
  t.job = std::make_shared<GemmJob>(JobSpec{shape, kernel},
                                    InflightBudget::Reservation(), allocator);
  FillRandom(t.job->a(), shape.a_elements(), seed);
  FillRandom(t.job->b(), shape.b_elements(), seed + 1);
  if (beta != 0.0f) {
    FillRandom(t.job->c(), shape.c_elements(), seed + 2);
  } else {
    std::fill(t.job->c(), t.job->c() + shape.c_elements(),
              std::numeric_limits<float>::quiet_NaN());
  }
  t.want = ReferenceGemm(shape, t.job->a(), t.job->b(),
                         beta != 0.0f ? t.job->c() : nullptr);
  return t;
}

class CudaExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    gpu_ =
        new absl::StatusOr<kernels::CudaPresence>(kernels::ProbeCudaDevices());
    if (!gpu_->ok() || !(*gpu_)->present) return;
    CudaExecutor::Options options;
    options.streams_per_device = 2;
    const char* tmp = std::getenv("TEST_TMPDIR");
    options.dispatch_cache =
        std::string(tmp != nullptr ? tmp : "/tmp") + "/dispatch.tsv";
    auto executor = CudaExecutor::Create(options);
    ASSERT_TRUE(executor.ok()) << executor.status();
    executor_ = executor->release();
  }
  static void TearDownTestSuite() {
    delete executor_;
    executor_ = nullptr;
    delete gpu_;
    gpu_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(gpu_->ok()) << gpu_->status();
    if (!(*gpu_)->present) GTEST_SKIP() << (*gpu_)->why_absent;
    ASSERT_NE(executor_, nullptr);
  }

  // Runs `jobs` as one batch and checks every result.
  static void RunAndCheck(std::vector<TestJob>& jobs) {
    Batch batch;
    for (TestJob& t : jobs) batch.push_back(t.job);
    ASSERT_TRUE(executor_->Execute(batch).ok());
    for (TestJob& t : jobs) {
      const GemmJob& job = *t.job;
      const double error = RelativeFrobeniusError(job.c(), t.want);
      EXPECT_EQ(job.timing().precision, job.kernel().precision());
      EXPECT_LE(error, ToleranceOf(job))
          << job.problem().ToString() << " kernel " << job.kernel() << " batch "
          << batch.size();
      EXPECT_FALSE(std::isnan(error));
      EXPECT_EQ(job.timing().device.rfind("cuda:", 0), 0u)
          << job.timing().device;
      EXPECT_GT(job.timing().compute, absl::ZeroDuration());
    }
  }

  static inline absl::StatusOr<kernels::CudaPresence>* gpu_ = nullptr;
  static inline CudaExecutor* executor_ = nullptr;
};

}  // namespace gemm::server::cuda_test

#endif  // GEMM_SERVER_CUDA_CUDA_EXECUTOR_TEST_FIXTURE_H_
