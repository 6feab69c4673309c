#include "server/cpu/cpu_executor.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "common/reference_gemm.h"
#include "gtest/gtest.h"

namespace gemm::server {
namespace {

// A job of `executor`'s kernel.
std::shared_ptr<GemmJob> MakeJob(const Executor& executor, GemmProblem shape,
                                 float alpha, float beta, uint64_t seed) {
  shape.alpha = alpha;
  shape.beta = beta;
  auto job = std::make_shared<GemmJob>(
      JobSpec{shape, *executor.ResolveKernel(shape, "cpu")},
      InflightBudget::Reservation());
  FillRandom(job->a(), shape.a_elements(), seed);
  FillRandom(job->b(), shape.b_elements(), seed + 1);
  if (beta != 0.0f) {
    FillRandom(job->c(), shape.c_elements(), seed + 2);
  } else {
    // Poison: beta == 0 must not read C.
    std::fill(job->c(), job->c() + shape.c_elements(),
              std::numeric_limits<float>::quiet_NaN());
  }
  return job;
}

class CpuExecutorShapes : public ::testing::TestWithParam<GemmProblem> {};

TEST_P(CpuExecutorShapes, MatchesFloat64Reference) {
  auto executor = CpuExecutor::Create({.threads = 0});
  ASSERT_TRUE(executor.ok());
  const GemmProblem shape = GetParam();
  for (float beta : {0.0f, -0.75f}) {
    auto job = MakeJob(**executor, shape, 1.25f, beta, shape.m * 31 + shape.k);
    std::vector<float> c_in(job->c(), job->c() + shape.c_elements());
    const std::vector<double> want =
        ReferenceGemm(job->problem(), job->a(), job->b(), c_in.data());
    ASSERT_TRUE((*executor)->Execute({job}).ok());
    EXPECT_LE(RelativeFrobeniusError(job->c(), want), 1e-5)
        << shape.ToString() << " beta " << beta;
    EXPECT_EQ(job->timing().device, "cpu");
  }
}

INSTANTIATE_TEST_SUITE_P(
    OddShapes, CpuExecutorShapes,
    ::testing::Values(GemmProblem{1, 1, 1}, GemmProblem{17, 3, 29},
                      GemmProblem{64, 65, 63, true, false},
                      GemmProblem{31, 47, 13, false, true},
                      GemmProblem{33, 9, 70, true, true}, GemmProblem{5, 7, 0},
                      // Heavy: run in tiles of C.
                      GemmProblem{2100, 1300, 64},
                      GemmProblem{1100, 700, 700, true, false},
                      GemmProblem{700, 1500, 300, false, true},
                      GemmProblem{999, 1201, 200, true, true},
                      GemmProblem{1500, 1100, 0}, GemmProblem{700, 600, 3}));

// A job runs from the handle its executor resolved; a handle from any
// other table (another executor's, a test's) is refused, not run.
TEST(CpuExecutorTest, RunsOnlyKernelsItResolved) {
  auto executor = CpuExecutor::Create({.threads = 1});
  ASSERT_TRUE(executor.ok());
  auto other = CpuExecutor::Create({.threads = 1});
  ASSERT_TRUE(other.ok());
  auto job = MakeJob(**other, {4, 4, 4}, 1.0f, 0.0f, 5);
  const absl::Status status = (*executor)->Execute({job});
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_NE(status.message().find("not resolved by the cpu backend"),
            std::string::npos)
      << status;
  EXPECT_TRUE((*other)->Execute({job}).ok());
}

TEST(CpuExecutorTest, LightAndHeavy) {
  EXPECT_TRUE(CpuExecutor::IsLight({64, 64, 64}));
  EXPECT_TRUE(CpuExecutor::IsLight({256, 256, 256}));
  EXPECT_TRUE(CpuExecutor::IsLight({512, 512, 0}));
  EXPECT_FALSE(CpuExecutor::IsLight({512, 512, 512}));
  EXPECT_FALSE(CpuExecutor::IsLight({4096, 4096, 0}));
  EXPECT_FALSE(CpuExecutor::IsLight({513, 512, 1}));
}

// One GEMM ran at a time, whole: a light job waited for all of a heavy one.
// It now runs between the heavy one's tiles.
TEST(CpuExecutorTest, ALightJobRunsBetweenTheTilesOfAHeavyOne) {
  auto executor = CpuExecutor::Create({.threads = 2});
  ASSERT_TRUE(executor.ok());
  // 58 GFLOP: a quarter of a second at least on two threads.
  auto heavy = MakeJob(**executor, {3072, 3072, 3072}, 1.0f, 0.0f, 7);
  std::atomic<bool> heavy_done{false};
  std::thread heavy_thread([&] {
    ASSERT_TRUE((*executor)->Execute({heavy}).ok());
    heavy_done = true;
  });
  absl::SleepFor(absl::Milliseconds(50));
  auto light = MakeJob(**executor, {63, 65, 67}, 1.0f, 0.5f, 11);
  std::vector<float> c_in(light->c(), light->c() + 63 * 65);
  const std::vector<double> want =
      ReferenceGemm(light->problem(), light->a(), light->b(), c_in.data());
  ASSERT_TRUE((*executor)->Execute({light}).ok());
  EXPECT_FALSE(heavy_done) << "the light job waited for the whole heavy one";
  EXPECT_LE(RelativeFrobeniusError(light->c(), want), 1e-5);
  heavy_thread.join();
  EXPECT_TRUE(heavy_done);
}

TEST(CpuExecutorTest, ResolvesAutoAndRejectsUnknownKernels) {
  auto executor = CpuExecutor::Create({});
  ASSERT_TRUE(executor.ok());
  EXPECT_EQ((*executor)->ResolveKernel({1, 1, 1}, "auto")->name(), "cpu");
  EXPECT_EQ((*executor)->ResolveKernel({1, 1, 1}, "")->name(), "cpu");
  auto unknown = (*executor)->ResolveKernel({1, 1, 1}, "v9");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("params.kernel"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace gemm::server
