// CudaExecutor on a real GPU (the suite: cuda_executor_test.cc): pinned
// host blocks from the arena, cancelled jobs, and the device memory budget.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/abft.h"
#include "common/reference_gemm.h"
#include "gtest/gtest.h"
#include "kernels/cuda_presence.h"
#include "kernels/sgemm.h"
#include "server/cuda/cuda_executor.h"
#include "server/cuda/cuda_executor_test_fixture.h"
#include "server/cuda/dispatch_calibration.h"
#include "server/cuda/pinned_host_pool.h"

namespace gemm::server::cuda_test {
namespace {

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
  jobs.push_back(MakeJob(executor_->host_allocator(), Shape(32, 32, 32),
                         executor_->FindKernel("v5"), 1.0f, 0.0f, 3));
  jobs.push_back(MakeJob(executor_->host_allocator(), Shape(32, 32, 32),
                         executor_->FindKernel("v5"), 1.0f, 0.0f, 4));
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
  EXPECT_EQ((*executor)->ResolveKernel(Shape(64, 64, 64), "auto")->name(),
            "cublas");
  // A batch larger than the budget runs in several launches.
  std::vector<TestJob> jobs;
  Batch batch;
  for (int i = 0; i < 12; ++i) {
    jobs.push_back(MakeJob((*executor)->host_allocator(), Shape(128, 128, 128),
                           (*executor)->FindKernel("v5"), 1.0f, 0.0f, 50 + i));
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
}  // namespace gemm::server::cuda_test
