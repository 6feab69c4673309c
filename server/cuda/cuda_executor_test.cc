// CudaExecutor on a real GPU: every kernel, batched and unbatched, against a
// float64 reference. Skips (with the reason) only where the host has no CUDA
// device; any other CUDA error fails (kernels/cuda_presence.h).
// Here devices, kernels and their precision, every kernel batched and not,
// K = 0; cuda_executor_test_check.cc has the result check against flipped
// bits, cuda_executor_test_memory.cc pinned memory, cancellation and the
// memory budget. The fixture: cuda_executor_test_fixture.h.
#include "server/cuda/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/abft.h"
#include "common/reference_gemm.h"
#include "gtest/gtest.h"
#include "kernels/cuda_presence.h"
#include "kernels/sgemm.h"
#include "server/cuda/cuda_executor_test_fixture.h"
#include "server/cuda/dispatch_calibration.h"
#include "server/cuda/pinned_host_pool.h"

namespace gemm::server::cuda_test {
namespace {

// The tuner's candidates, on any host: from v6 on, v10-packed by name only.
TEST(TunerCandidatesTest, LeaveOutTheTeachingRoadAndV10Packed) {
  EXPECT_EQ(TunerCandidates({"v0", "v5", "v6", "v8", "v10", "v10-64x64",
                             "v10-packed", "v11", "v12", "cublas"}),
            (std::vector<std::string>{"v6", "v8", "v10", "v10-64x64", "v11",
                                      "v12", "cublas"}));
}

TEST_F(CudaExecutorTest, DescribesDevicesAndKernels) {
  const auto devices = executor_->devices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(devices[0].id.rfind("cuda:", 0), 0u);
  EXPECT_FALSE(devices[0].name.empty());
  EXPECT_GT(devices[0].memory_bytes, 0u);
  EXPECT_FALSE(devices[0].compute_capability.empty());
  const auto kernels = executor_->kernels();
  for (const char* name :
       {"v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "cublas"}) {
    EXPECT_NE(std::find(kernels.begin(), kernels.end(), name), kernels.end())
        << name;
  }
  EXPECT_GE(executor_->concurrency(), 2);
}

TEST_F(CudaExecutorTest, ResolvesKernels) {
  auto chosen = executor_->ResolveKernel(Shape(1024, 1024, 1024), "auto");
  ASSERT_TRUE(chosen.ok());
  // One of the candidates: the table's (dispatch_calibration.h) at a
  // shape's first job, the tuner's later.
  std::vector<std::string> candidates = AutoCandidates(true);
  ASSERT_NE(executor_->shape_tuner(), nullptr);
  for (const std::string& name : executor_->shape_tuner()->kernels()) {
    candidates.push_back(name);
  }
  EXPECT_NE(std::find(candidates.begin(), candidates.end(), chosen->name()),
            candidates.end())
      << *chosen;
  // auto picks only among the kernels the precision allows: v12 (3xTF32)
  // for fp32-tensor where it is the fastest, never for fp32.
  for (Precision precision : {Precision::kFp32, Precision::kFp32Tensor}) {
    for (const GemmProblem& shape :
         {Shape(64, 64, 64), Shape(1000, 999, 777), Shape(4096, 4096, 4096)}) {
      auto resolved = executor_->ResolveKernel(shape, "auto", precision);
      ASSERT_TRUE(resolved.ok()) << resolved.status();
      EXPECT_EQ(executor_->FindKernel(resolved->name()), *resolved);
      EXPECT_TRUE(KernelMayServe(resolved->precision(), precision))
          << *resolved << " for " << PrecisionName(precision);
    }
  }
  EXPECT_EQ(executor_->ResolveKernel(Shape(8, 8, 8), "v2")->name(), "v2");
  EXPECT_EQ(executor_->ResolveKernel(Shape(8, 8, 8), "v99").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(executor_->dispatch_policy().entries().size(), 343u);
}

// A shape's first job queues it for the tuner; once measured, auto runs
// the fastest kernel its precision allows there, split-K ones included,
// and that kernel's results are right (transposes and beta too).
TEST_F(CudaExecutorTest, AutoRunsTheTunedKernelOnceTheShapeIsMeasured) {
  ShapeTuner* tuner = executor_->shape_tuner();
  ASSERT_NE(tuner, nullptr);
  const std::vector<std::string>& kernels = tuner->kernels();
  for (const char* split_k : {"v8", "v11"}) {
    EXPECT_NE(std::find(kernels.begin(), kernels.end(), split_k), kernels.end())
        << split_k;
  }
  EXPECT_EQ(std::find(kernels.begin(), kernels.end(), "v5"), kernels.end());
  uint64_t seed = 5000;
  for (const GemmProblem& shape :
       {Shape(64, 64, 8192), Shape(3000, 200, 3000, true, false),
        Shape(333, 555, 777, false, true)}) {
    for (Precision precision : {Precision::kFp32, Precision::kFp32Tensor}) {
      ASSERT_TRUE(executor_->ResolveKernel(shape, "auto", precision).ok());
      tuner->WaitIdle();
      auto tuned = executor_->ResolveKernel(shape, "auto", precision);
      ASSERT_TRUE(tuned.ok()) << tuned.status();
      // The fastest measured kernel of those the precision allows.
      std::string fastest;
      double best = 0;
      for (const ShapeTuner::Tuned& entry : tuner->tuned()) {
        if (entry.m != shape.m || entry.n != shape.n || entry.k != shape.k) {
          continue;
        }
        for (size_t i = 0; i < entry.ms.size(); ++i) {
          const kernels::SgemmKernel* kernel =
              kernels::KernelRegistry::Global().Find(kernels[i]);
          if (entry.ms[i] < 0 ||
              !KernelMayServe(kernel->precision(), precision)) {
            continue;
          }
          if (fastest.empty() || entry.ms[i] < best) {
            fastest = kernels[i];
            best = entry.ms[i];
          }
        }
      }
      EXPECT_EQ(tuned->name(), fastest) << shape.ToString();
      std::vector<TestJob> jobs;
      jobs.push_back(MakeJob(executor_->host_allocator(), shape, *tuned, 1.0f,
                             0.5f, seed += 10));
      RunAndCheck(jobs);
    }
  }
}

TEST_F(CudaExecutorTest, EveryKernelOnOddShapesUnbatched) {
  const std::vector<GemmProblem> shapes = {Shape(1, 1, 1),
                                           Shape(17, 33, 65),
                                           Shape(127, 129, 131, true, false),
                                           Shape(130, 67, 257, false, true),
                                           Shape(64, 96, 33, true, true),
                                           Shape(1000, 999, 77)};
  uint64_t seed = 1;
  for (const std::string& name : executor_->kernels()) {
    const KernelHandle kernel = executor_->FindKernel(name);
    for (const GemmProblem& shape : shapes) {
      for (float beta : {0.0f, 0.5f}) {
        std::vector<TestJob> jobs;
        jobs.push_back(MakeJob(executor_->host_allocator(), shape, kernel, 1.5f,
                               beta, seed += 10));
        EXPECT_TRUE(jobs[0].job->host_storage_from_allocator());
        RunAndCheck(jobs);
      }
    }
  }
}

TEST_F(CudaExecutorTest, EveryKernelBatched) {
  uint64_t seed = 1000;
  for (const std::string& name : executor_->kernels()) {
    const KernelHandle kernel = executor_->FindKernel(name);
    for (const GemmProblem& shape : {Shape(65, 63, 31), Shape(128, 128, 128),
                                     Shape(33, 17, 9, true, true)}) {
      for (float beta : {0.0f, -0.75f}) {
        std::vector<TestJob> jobs;
        for (int i = 0; i < 7; ++i) {
          jobs.push_back(MakeJob(executor_->host_allocator(), shape, kernel,
                                 0.5f, beta, seed += 10));
        }
        RunAndCheck(jobs);
        EXPECT_EQ(jobs[0].job->timing().compute, jobs[6].job->timing().compute)
            << "one launch for the whole batch";
      }
    }
  }
}

TEST_F(CudaExecutorTest, AutoOnALargeJobAndPageableStorage) {
  const GemmProblem shape = Shape(1023, 1025, 1000);
  auto chosen = executor_->ResolveKernel(shape, "auto");
  ASSERT_TRUE(chosen.ok());
  std::vector<TestJob> jobs;
  // nullptr allocator: heap memory must work too, only slower.
  jobs.push_back(MakeJob(nullptr, shape, *chosen, 1.0f, 0.0f, 7));
  RunAndCheck(jobs);
}

// K = 0 needs no GPU: C = beta * C on the host, zeros when beta is 0 (even
// where C held NaN).
TEST_F(CudaExecutorTest, KZeroIsBetaTimesCOnTheHost) {
  for (float beta : {0.0f, -1.5f}) {
    std::vector<TestJob> jobs;
    jobs.push_back(MakeJob(executor_->host_allocator(), Shape(37, 41, 0),
                           executor_->FindKernel("v5"), 1.0f, beta, 3));
    jobs.push_back(MakeJob(executor_->host_allocator(), Shape(37, 41, 0),
                           executor_->FindKernel("v5"), 1.0f, beta, 4));
    Batch batch;
    for (TestJob& t : jobs) batch.push_back(t.job);
    ASSERT_TRUE(executor_->Execute(batch).ok());
    for (TestJob& t : jobs) {
      EXPECT_LE(RelativeFrobeniusError(t.job->c(), t.want), kTolerance)
          << "beta " << beta;
      EXPECT_EQ(t.job->timing().device, "host (k = 0)");
    }
  }
}

// auto chooses within the precision asked for; a named kernel must compute
// in it (float32 kernels serve the float32-accurate Tensor Core mode).
TEST_F(CudaExecutorTest, KernelsAreResolvedWithinTheirPrecision) {
  const GemmProblem shape = Shape(512, 512, 512);
  EXPECT_EQ(executor_->ResolveKernel(shape, "auto", Precision::kTf32)->name(),
            "cublas-tf32");
  EXPECT_EQ(executor_->ResolveKernel(shape, "auto", Precision::kBf16)->name(),
            "cublas-bf16");
  const auto tensor =
      executor_->ResolveKernel(shape, "auto", Precision::kFp32Tensor);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  // A float32 kernel or a 3xTF32 one (v12), whichever the table found the
  // faster.
  EXPECT_TRUE(KernelMayServe(tensor->precision(), Precision::kFp32Tensor))
      << *tensor;
  EXPECT_EQ(
      executor_->ResolveKernel(shape, "v6", Precision::kFp32Tensor)->name(),
      "v6");
  EXPECT_EQ(executor_->ResolveKernel(shape, "cublas-tf32").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      executor_->ResolveKernel(shape, "v6", Precision::kBf16).status().code(),
      absl::StatusCode::kInvalidArgument);
  for (const KernelDescription& k : executor_->kernel_details()) {
    EXPECT_FALSE(k.description.empty()) << k.name;
  }
}

}  // namespace
}  // namespace gemm::server::cuda_test
