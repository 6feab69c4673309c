#include "server/core/gemm_job.h"

#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace gemm::server {
namespace {

TEST(JobSpecTest, BatchKeyComparesShapeKernelAndScalars) {
  const KernelTable kernels({{"cpu"}, {"v5"}});
  JobSpec p{.problem = {.m = 4, .n = 4, .k = 4, .alpha = 1, .beta = 0},
            .kernel = kernels.Find("cpu")};
  JobSpec q = p;
  EXPECT_TRUE(p.SameBatchAs(q));
  q.problem.beta = 0.5f;
  EXPECT_FALSE(p.SameBatchAs(q));
  q = p;
  q.problem.trans_b = true;
  EXPECT_FALSE(p.SameBatchAs(q));
  q = p;
  q.kernel = kernels.Find("v5");
  EXPECT_FALSE(p.SameBatchAs(q));
}

// A reservation near 2^64 must not wrap the sum and pass the limit.
TEST(InflightBudgetTest, AHugeReservationDoesNotWrap) {
  InflightBudget budget(~uint64_t{0} - 1);
  InflightBudget::Reservation small, huge;
  ASSERT_TRUE(budget.Reserve(100, &small).ok());
  EXPECT_EQ(budget.Reserve(~uint64_t{0} - 50, &huge).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(budget.used(), 100u);
}

TEST(InflightBudgetTest, ReservesUntilFullAndReleasesOnDestruction) {
  InflightBudget budget(100);
  {
    InflightBudget::Reservation r1, r2, r3;
    ASSERT_TRUE(budget.Reserve(60, &r1).ok());
    ASSERT_TRUE(budget.Reserve(40, &r2).ok());
    absl::Status full = budget.Reserve(1, &r3);
    EXPECT_EQ(full.code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(budget.used(), 100u);
    InflightBudget::Reservation moved = std::move(r1);
    EXPECT_EQ(budget.used(), 100u) << "a move keeps the claim";
  }
  EXPECT_EQ(budget.used(), 0u);
}

TEST(ScaleByBetaTest, ZeroBetaOverwritesWhateverCHeldOtherwiseScales) {
  std::vector<float> c = {std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(), -3.0f};
  ScaleByBeta(c.data(), c.size(), 0.0f);
  EXPECT_EQ(c, (std::vector<float>{0.0f, 0.0f, 0.0f}));
  c = {2.0f, -4.0f, 0.5f};
  ScaleByBeta(c.data(), c.size(), -0.5f);
  EXPECT_EQ(c, (std::vector<float>{-1.0f, 2.0f, -0.25f}));
}

TEST(GemmJobTest, FinishRunsTheCallbackOnce) {
  InflightBudget budget(1 << 20);
  InflightBudget::Reservation r;
  ASSERT_TRUE(budget.Reserve(1000, &r).ok());
  auto job = std::make_shared<GemmJob>(
      JobSpec{.problem = {.m = 2, .n = 2, .k = 2}}, std::move(r));
  int calls = 0;
  absl::StatusCode code = absl::StatusCode::kOk;
  job->set_done_callback([&](GemmJob&, absl::Status s) {
    ++calls;
    code = s.code();
  });
  job->Finish(absl::InternalError("boom"));
  job->Finish(absl::OkStatus());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(code, absl::StatusCode::kInternal);
  job.reset();
  EXPECT_EQ(budget.used(), 0u) << "the job's bytes return with the job";
}

TEST(GemmJobTest, DeadlineIsTheEarlierOfTimeoutAndCallDeadline) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  GemmJob job(JobSpec{.problem = {.m = 1, .n = 1, .k = 1},
                      .timeout = absl::Milliseconds(50)},
              {});
  job.MarkReady(t0);
  EXPECT_EQ(job.deadline(), t0 + absl::Milliseconds(50));

  GemmJob job2(JobSpec{.problem = {.m = 1, .n = 1, .k = 1},
                       .timeout = absl::Milliseconds(50)},
               {});
  job2.set_call_deadline(t0 + absl::Milliseconds(10));
  job2.MarkReady(t0);
  EXPECT_EQ(job2.deadline(), t0 + absl::Milliseconds(10));

  GemmJob job3(JobSpec{.problem = {.m = 1, .n = 1, .k = 1}}, {});
  job3.MarkReady(t0);
  EXPECT_EQ(job3.deadline(), absl::InfiniteFuture());
}

}  // namespace
}  // namespace gemm::server
