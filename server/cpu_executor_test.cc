#include "server/cpu_executor.h"

#include <cmath>
#include <limits>

#include "common/reference_gemm.h"
#include "gtest/gtest.h"

namespace gemm::server {
namespace {

std::shared_ptr<GemmJob> MakeJob(GemmProblem shape, float alpha, float beta,
                                 uint64_t seed) {
  shape.alpha = alpha;
  shape.beta = beta;
  auto job = std::make_shared<GemmJob>(JobSpec{shape, "cpu"},
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
    auto job = MakeJob(shape, 1.25f, beta, shape.m * 31 + shape.k);
    std::vector<float> c_in(job->c(), job->c() + shape.c_elements());
    const std::vector<double> want =
        ReferenceGemm(job->problem(), job->a(), job->b(), c_in.data());
    ASSERT_TRUE((*executor)->Execute({job}).ok());
    EXPECT_LE(RelativeFrobeniusError(job->c(), want), 1e-5)
        << shape.ToString() << " beta " << beta;
    EXPECT_EQ(job->timing().device, "cpu");
  }
}

INSTANTIATE_TEST_SUITE_P(OddShapes, CpuExecutorShapes,
                         ::testing::Values(GemmProblem{1, 1, 1},
                                           GemmProblem{17, 3, 29},
                                           GemmProblem{64, 65, 63, true, false},
                                           GemmProblem{31, 47, 13, false, true},
                                           GemmProblem{33, 9, 70, true, true},
                                           GemmProblem{5, 7, 0}));

TEST(CpuExecutorTest, ResolvesAutoAndRejectsUnknownKernels) {
  auto executor = CpuExecutor::Create({});
  ASSERT_TRUE(executor.ok());
  EXPECT_EQ(*(*executor)->ResolveKernel({1, 1, 1}, "auto"), "cpu");
  EXPECT_EQ(*(*executor)->ResolveKernel({1, 1, 1}, ""), "cpu");
  auto unknown = (*executor)->ResolveKernel({1, 1, 1}, "v9");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("params.kernel"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace gemm::server
