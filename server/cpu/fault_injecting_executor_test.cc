#include "server/cpu/fault_injecting_executor.h"

#include <algorithm>
#include <limits>

#include "common/reference_gemm.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_executor.h"

namespace gemm::server {
namespace {

std::unique_ptr<Executor> WrappedCpu() {
  auto cpu = CpuExecutor::Create({});
  EXPECT_TRUE(cpu.ok());
  return FaultInjectingExecutor::Wrap(std::move(*cpu), "broken");
}

TEST(FaultInjectingExecutorTest, AddsTheFailingKernel) {
  std::unique_ptr<Executor> executor = WrappedCpu();
  EXPECT_EQ(executor->backend(), "cpu");
  EXPECT_EQ(executor->kernels(), (std::vector<std::string>{"cpu", "broken"}));
  EXPECT_EQ(executor->ResolveKernel({2, 2, 2}, "broken")->name(), "broken");
  EXPECT_EQ(executor->ResolveKernel({2, 2, 2}, "auto")->name(), "cpu");
  EXPECT_EQ(executor->ResolveKernel({2, 2, 2}, "v9").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FaultInjectingExecutorTest, InjectedFailureIsInternal) {
  std::unique_ptr<Executor> executor = WrappedCpu();
  JobSpec spec{.problem = {2, 2, 2},
               .kernel = *executor->ResolveKernel({2, 2, 2}, "broken")};
  auto job = std::make_shared<GemmJob>(spec, InflightBudget::Reservation());
  EXPECT_EQ(executor->Execute({job}).code(), absl::StatusCode::kInternal);
}

TEST(FaultInjectingExecutorTest, OtherKernelsRunOnTheInnerExecutor) {
  std::unique_ptr<Executor> executor = WrappedCpu();
  const GemmProblem problem{9, 7, 5};
  auto job = std::make_shared<GemmJob>(
      JobSpec{problem, *executor->ResolveKernel(problem, "cpu")},
      InflightBudget::Reservation());
  FillRandom(job->a(), problem.a_elements(), 1);
  FillRandom(job->b(), problem.b_elements(), 2);
  // Poison: beta == 0 must not read C, and every element must be written.
  std::fill(job->c(), job->c() + problem.c_elements(),
            std::numeric_limits<float>::quiet_NaN());
  const std::vector<double> want =
      ReferenceGemm(problem, job->a(), job->b(), nullptr);
  ASSERT_TRUE(executor->Execute({job}).ok());
  EXPECT_LE(RelativeFrobeniusError(job->c(), want), 1e-5);
}

}  // namespace
}  // namespace gemm::server
