// CudaExecutor on a real GPU: every kernel, batched and unbatched, against a
// float64 reference. Skips (with the reason) only where the host has no CUDA
// device; any other CUDA error fails (kernels/cuda_presence.h).
#include "server/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "common/abft.h"
#include "common/reference_gemm.h"
#include "gtest/gtest.h"
#include "kernels/cuda_presence.h"
#include "kernels/sgemm.h"
#include "server/dispatch_calibration.h"
#include "server/pinned_host_pool.h"

namespace gemm::server {
namespace {

constexpr double kTolerance = 1e-5;

// What a job's result may be off by, from the arithmetic that ran it.
double ToleranceOf(const GemmJob& job) {
  return VerifyTolerance(job.timing().precision);
}

GemmProblem Shape(uint32_t m, uint32_t n, uint32_t k, bool ta = false,
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

TestJob MakeJob(HostAllocator* allocator, GemmProblem shape,
                const std::string& kernel, float alpha, float beta,
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
      EXPECT_EQ(job.timing().precision,
                executor_->KernelPrecision(job.kernel()));
      EXPECT_LE(error, ToleranceOf(job))
          << job.problem().ToString() << " kernel " << job.kernel() << " batch "
          << batch.size();
      EXPECT_FALSE(std::isnan(error));
      EXPECT_EQ(job.timing().device.rfind("cuda:", 0), 0u)
          << job.timing().device;
      EXPECT_GT(job.timing().compute, absl::ZeroDuration());
    }
  }

  static absl::StatusOr<kernels::CudaPresence>* gpu_;
  static CudaExecutor* executor_;
};
absl::StatusOr<kernels::CudaPresence>* CudaExecutorTest::gpu_ = nullptr;
CudaExecutor* CudaExecutorTest::executor_ = nullptr;

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
  // One of the candidates (dispatch_calibration.h).
  const std::vector<std::string> candidates = AutoCandidates(true);
  EXPECT_NE(std::find(candidates.begin(), candidates.end(), *chosen),
            candidates.end())
      << *chosen;
  // auto picks only among the kernels the precision allows: v12 (3xTF32)
  // for fp32-tensor where it is the fastest, never for fp32.
  for (Precision precision : {Precision::kFp32, Precision::kFp32Tensor}) {
    for (const GemmProblem& shape :
         {Shape(64, 64, 64), Shape(1000, 999, 777), Shape(4096, 4096, 4096)}) {
      auto resolved = executor_->ResolveKernel(shape, "auto", precision);
      ASSERT_TRUE(resolved.ok()) << resolved.status();
      const kernels::SgemmKernel* kernel =
          kernels::KernelRegistry::Global().Find(*resolved);
      ASSERT_NE(kernel, nullptr) << *resolved;
      EXPECT_TRUE(KernelMayServe(kernel->precision(), precision))
          << *resolved << " for " << PrecisionName(precision);
    }
  }
  EXPECT_EQ(*executor_->ResolveKernel(Shape(8, 8, 8), "v2"), "v2");
  EXPECT_EQ(executor_->ResolveKernel(Shape(8, 8, 8), "v99").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(executor_->dispatch_policy().entries().size(), 343u);
}

TEST_F(CudaExecutorTest, EveryKernelOnOddShapesUnbatched) {
  const std::vector<GemmProblem> shapes = {Shape(1, 1, 1),
                                           Shape(17, 33, 65),
                                           Shape(127, 129, 131, true, false),
                                           Shape(130, 67, 257, false, true),
                                           Shape(64, 96, 33, true, true),
                                           Shape(1000, 999, 77)};
  uint64_t seed = 1;
  for (const std::string& kernel : executor_->kernels()) {
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
  for (const std::string& kernel : executor_->kernels()) {
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
    jobs.push_back(MakeJob(executor_->host_allocator(), Shape(37, 41, 0), "v5",
                           1.0f, beta, 3));
    jobs.push_back(MakeJob(executor_->host_allocator(), Shape(37, 41, 0), "v5",
                           1.0f, beta, 4));
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

// Flips bit `bit` of the float at device address `value` in `stream`,
// waiting for the kernel before it and for the flip.
void FlipOnDevice(float* value, int bit, cudaStream_t stream) {
  uint32_t word = 0;
  ASSERT_EQ(cudaMemcpyAsync(&word, value, 4, cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  word ^= 1u << bit;
  ASSERT_EQ(cudaMemcpyAsync(value, &word, 4, cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
}

// How far a line (row `i`, or column `i - m`) of the clean result `c` may
// honestly be off its prediction, plus its tolerance: a flip that moves the
// line's sum further must be caught.
double Slack(const GemmProblem& p, const float* a, const float* b,
             const float* c_in, const float* c, uint64_t line) {
  std::vector<double> s(abft::Layout(p).slots(), 0.0);
  for (const abft::Pass& pass : abft::OperandPasses(p, a, b, s.data())) {
    abft::Reduce2DOnHost(pass);
  }
  if (p.beta != 0.0f) abft::Reduce2DOnHost(abft::InputCPass(p, c_in, s.data()));
  abft::Reduce2DOnHost(abft::OutputCPass(p, c, s.data()));
  return abft::Slack(p, s.data(), line);
}

// The check on the device catches every bit flip whose effect exceeds what
// the line may honestly be off by; the batch's other job is untouched; a
// caught result is re-run on another kernel and comes back right.
TEST_F(CudaExecutorTest, TheCheckCatchesEveryFlipAboveItsSlack) {
  HostAllocator* pinned = executor_->host_allocator();
  int caught = 0, flips = 0;
  for (const GemmProblem shape :
       {Shape(97, 61, 203, true, false), Shape(256, 256, 256),
        Shape(130, 77, 64, false, true)}) {
    for (int bit = 0; bit < 32; ++bit) {
      const float beta = bit % 3 == 0 ? 0.5f : 0.0f;
      std::vector<TestJob> jobs;
      jobs.push_back(MakeJob(pinned, shape, "cublas", 1.0f, beta, 7 * bit));
      jobs.push_back(MakeJob(pinned, shape, "cublas", 1.0f, beta, 7 * bit));
      for (TestJob& t : jobs) {
        t.job = std::make_shared<GemmJob>(
            JobSpec{t.job->problem(), "cublas", absl::ZeroDuration(), true},
            InflightBudget::Reservation(), pinned);
        FillRandom(t.job->a(), shape.a_elements(), 7 * bit);
        FillRandom(t.job->b(), shape.b_elements(), 7 * bit + 1);
        if (beta != 0.0f)
          FillRandom(t.job->c(), shape.c_elements(), 7 * bit + 2);
      }
      const std::vector<float> c_in(jobs[1].job->c(),
                                    jobs[1].job->c() + shape.c_elements());
      // The clean result, from the same kernel.
      TestJob clean = MakeJob(pinned, shape, "cublas", 1.0f, beta, 7 * bit);
      ASSERT_TRUE(executor_->Execute({clean.job}).ok());
      const uint64_t at = (bit * 2654435761u) % shape.c_elements();
      GemmJob* victim = jobs[1].job.get();
      executor_->SetResultCorrupterForTesting([&](const ResultSite& site) {
        if (site.job == victim && site.run == 0) {
          FlipOnDevice(site.c + at, bit,
                       static_cast<cudaStream_t>(site.cuda_stream));
        }
      });
      ASSERT_TRUE(executor_->Execute({jobs[0].job, jobs[1].job}).ok());
      executor_->SetResultCorrupterForTesting(nullptr);
      // The untouched job, and a caught one after its re-run, are right; an
      // uncaught flip stays within what float32 rounding could explain,
      // which may exceed the 1e-5 of a typical result.
      EXPECT_LE(RelativeFrobeniusError(jobs[0].job->c(), jobs[0].want),
                kTolerance);
      float flipped = clean.job->c()[at];
      uint32_t word;
      std::memcpy(&word, &flipped, 4);
      word ^= 1u << bit;
      std::memcpy(&flipped, &word, 4);
      const double effect = std::fabs(double{flipped} - clean.job->c()[at]);
      const double slack =
          std::min(Slack(shape, victim->a(), victim->b(), c_in.data(),
                         clean.job->c(), at / shape.n),
                   Slack(shape, victim->a(), victim->b(), c_in.data(),
                         clean.job->c(), shape.m + at % shape.n));
      const JobCheck& check = victim->timing().check;
      EXPECT_TRUE(check.ran);
      EXPECT_EQ(jobs[0].job->timing().check.mismatches, 0u);
      ++flips;
      if (check.mismatches > 0) ++caught;
      if (effect > slack || std::isnan(flipped)) {
        EXPECT_EQ(check.mismatches, 1u)
            << shape.ToString() << " bit " << bit << " effect " << effect
            << " slack " << slack;
        EXPECT_FALSE(check.rerun_kernel.empty()) << check.detail;
        EXPECT_NE(check.rerun_kernel, "cublas") << check.detail;
      }
      if (check.mismatches > 0) {
        EXPECT_LE(RelativeFrobeniusError(victim->c(), jobs[1].want),
                  kTolerance);
      } else {
        EXPECT_LE(effect, 2 * slack) << shape.ToString() << " bit " << bit;
      }
    }
  }
  std::printf("caught %d of %d flips\n", caught, flips);
}

// auto chooses within the precision asked for; a named kernel must compute
// in it (float32 kernels serve the float32-accurate Tensor Core mode).
TEST_F(CudaExecutorTest, KernelsAreResolvedWithinTheirPrecision) {
  const GemmProblem shape = Shape(512, 512, 512);
  EXPECT_EQ(*executor_->ResolveKernel(shape, "auto", Precision::kTf32),
            "cublas-tf32");
  EXPECT_EQ(*executor_->ResolveKernel(shape, "auto", Precision::kBf16),
            "cublas-bf16");
  const auto tensor =
      executor_->ResolveKernel(shape, "auto", Precision::kFp32Tensor);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  // A float32 kernel or a 3xTF32 one (v12), whichever the table found the
  // faster.
  EXPECT_TRUE(KernelMayServe(executor_->KernelPrecision(*tensor),
                             Precision::kFp32Tensor))
      << *tensor;
  EXPECT_EQ(*executor_->ResolveKernel(shape, "v6", Precision::kFp32Tensor),
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

TEST_F(CudaExecutorTest, PinnedBlocksOverTheCapStayPageable) {
  auto pool = PinnedHostPool::Create(/*arena_bytes=*/64 << 20,
                                     /*max_block_bytes=*/1 << 20);
  ASSERT_EQ(pool->size(), uint64_t{64} << 20);
  void* small = pool->Allocate(1 << 20);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(pool->Allocate((1 << 20) + 1), nullptr) << "pageable instead";
  EXPECT_EQ(pool->pageable_blocks(), 1u);
  pool->Free(small, 1 << 20);
  EXPECT_EQ(pool->in_use(), 0u);
}

// Blocks come from the arena pinned at start: the driver says each is
// page-locked host memory, they do not overlap, and once the arena is full
// a block is refused (pageable) instead of pinned anew.
TEST_F(CudaExecutorTest, PinnedBlocksComeFromTheArenaAndNothingIsPinnedLater) {
  constexpr uint64_t kMiB = 1 << 20;
  auto pool = PinnedHostPool::Create(/*arena_bytes=*/8 * kMiB,
                                     /*max_block_bytes=*/0);
  ASSERT_EQ(pool->size(), 8 * kMiB);
  std::vector<char*> blocks;
  for (int i = 0; i < 4; ++i) {
    blocks.push_back(static_cast<char*>(pool->Allocate(2 * kMiB)));
    ASSERT_NE(blocks.back(), nullptr);
    cudaPointerAttributes attributes;
    ASSERT_EQ(cudaPointerGetAttributes(&attributes, blocks.back()),
              cudaSuccess);
    EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
    std::memset(blocks.back(), 0x5a, 2 * kMiB);
  }
  std::sort(blocks.begin(), blocks.end());
  for (size_t i = 1; i < blocks.size(); ++i) {
    EXPECT_GE(blocks[i] - blocks[i - 1], static_cast<ptrdiff_t>(2 * kMiB));
  }
  EXPECT_EQ(pool->in_use(), 8 * kMiB);
  EXPECT_EQ(pool->Allocate(1), nullptr) << "full: pageable, not pinned anew";
  EXPECT_EQ(pool->pageable_blocks(), 1u);
  pool->Free(blocks[1], 2 * kMiB);
  pool->Free(blocks[2], 2 * kMiB);
  void* merged = pool->Allocate(4 * kMiB);  // the two freed blocks, merged
  EXPECT_EQ(merged, blocks[1]);
  pool->Free(merged, 4 * kMiB);
  pool->Free(blocks[0], 2 * kMiB);
  pool->Free(blocks[3], 2 * kMiB);
  EXPECT_EQ(pool->in_use(), 0u);
}

TEST_F(CudaExecutorTest, AnEmptyPinnedPoolLeavesEveryBlockPageable) {
  auto pool = PinnedHostPool::Create(/*arena_bytes=*/0, /*max_block_bytes=*/0);
  EXPECT_EQ(pool->size(), 0u);
  EXPECT_EQ(pool->Allocate(4096), nullptr);
}

TEST_F(CudaExecutorTest, CancelledJobsDoNotRun) {
  std::vector<TestJob> jobs;
  jobs.push_back(MakeJob(executor_->host_allocator(), Shape(32, 32, 32), "v5",
                         1.0f, 0.0f, 3));
  jobs.push_back(MakeJob(executor_->host_allocator(), Shape(32, 32, 32), "v5",
                         1.0f, 0.0f, 4));
  absl::Status seen;
  jobs[0].job->set_done_callback(
      [&seen](GemmJob&, absl::Status s) { seen = std::move(s); });
  jobs[0].job->Cancel();
  Batch batch = {jobs[0].job, jobs[1].job};
  ASSERT_TRUE(executor_->Execute(batch).ok());
  EXPECT_EQ(seen.code(), absl::StatusCode::kCancelled);
  EXPECT_LE(RelativeFrobeniusError(jobs[1].job->c(), jobs[1].want), kTolerance);
}

// Each test builds its own executor.
class CudaExecutorBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<kernels::CudaPresence> gpu = kernels::ProbeCudaDevices();
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    if (!gpu->present) GTEST_SKIP() << gpu->why_absent;
  }
};

TEST_F(CudaExecutorBudgetTest, JobsOverTheBudgetAreRefused) {
  CudaExecutor::Options options;
  options.calibrate = false;
  options.device_memory_budget_bytes = 1 << 20;
  auto executor = CudaExecutor::Create(options);
  ASSERT_TRUE(executor.ok());
  EXPECT_EQ((*executor)
                ->ResolveKernel(Shape(1024, 1024, 1024), "auto")
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(*(*executor)->ResolveKernel(Shape(64, 64, 64), "auto"), "cublas");
  // A batch larger than the budget runs in several launches.
  std::vector<TestJob> jobs;
  Batch batch;
  for (int i = 0; i < 12; ++i) {
    jobs.push_back(MakeJob((*executor)->host_allocator(), Shape(128, 128, 128),
                           "v5", 1.0f, 0.0f, 50 + i));
    batch.push_back(jobs.back().job);
  }
  ASSERT_TRUE((*executor)->Execute(batch).ok());
  for (TestJob& t : jobs) {
    EXPECT_LE(RelativeFrobeniusError(t.job->c(), t.want), kTolerance);
  }
}

TEST_F(CudaExecutorBudgetTest, BadDevicesAreRefused) {
  CudaExecutor::Options options;
  options.calibrate = false;
  options.devices = {999};
  EXPECT_EQ(CudaExecutor::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gemm::server
