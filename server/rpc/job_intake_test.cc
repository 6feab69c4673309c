#include "server/rpc/job_intake.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/reference_gemm.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_executor.h"

namespace gemm::server {
namespace {

constexpr double kTolerance = 1e-5;

wire::Pieces PiecesOf(const std::vector<float>& v) {
  wire::Pieces pieces;
  pieces.parts.emplace_back(reinterpret_cast<const char*>(v.data()),
                            4 * v.size());
  pieces.size = 4 * v.size();
  pieces.present = true;
  return pieces;
}

v1::GemmParams Params(uint32_t m, uint32_t n, uint32_t k, float beta) {
  v1::GemmParams params;
  params.set_m(m);
  params.set_n(n);
  params.set_k(k);
  params.set_alpha(1.5f);
  params.set_beta(beta);
  return params;
}

// The outcome of a submitted job, once its done callback ran.
struct Outcome {
  absl::Notification done;
  absl::Status status;
  std::vector<float> c;
};

GemmJob::DoneCallback Record(Outcome* outcome) {
  return [outcome](GemmJob& job, absl::Status status) {
    outcome->status = std::move(status);
    outcome->c.assign(job.c(), job.c() + job.problem().c_elements());
    outcome->done.Notify();
  };
}

class JobIntakeTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(JobIntake::Options()); }
  void Start(const JobIntake::Options& options) {
    auto cpu = CpuExecutor::Create({.threads = 1});
    ASSERT_TRUE(cpu.ok());
    executor_ = std::move(*cpu);
    auto scheduler = BatchScheduler::Create({}, executor_.get());
    ASSERT_TRUE(scheduler.ok());
    scheduler_ = std::move(*scheduler);
    intake_ =
        std::make_unique<JobIntake>(options, executor_.get(), scheduler_.get());
  }
  void TearDown() override { scheduler_->Stop(); }
  // A 2 x 2 x 2 job (48 bytes) of the executor's kernel.
  JobSpec SmallSpec() const {
    return JobSpec{.problem = {2, 2, 2},
                   .kernel = *executor_->ResolveKernel({2, 2, 2}, "cpu")};
  }

  std::unique_ptr<Executor> executor_;
  std::unique_ptr<BatchScheduler> scheduler_;
  std::unique_ptr<JobIntake> intake_;
};

TEST_F(JobIntakeTest, AdmitsCopiesAndRunsACompleteJob) {
  const GemmProblem problem{13, 11, 7, false, false, 1.5f, -0.5f};
  std::vector<float> a(problem.a_elements()), b(problem.b_elements()),
      c(problem.c_elements());
  FillRandom(a.data(), a.size(), 1);
  FillRandom(b.data(), b.size(), 2);
  FillRandom(c.data(), c.size(), 3);
  const std::vector<double> want =
      ReferenceGemm(problem, a.data(), b.data(), c.data());
  auto job = intake_->AdmitComplete(Params(13, 11, 7, -0.5f), PiecesOf(a),
                                    PiecesOf(b), PiecesOf(c));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)->kernel().name(), "cpu");
  EXPECT_EQ(intake_->budget().used(), JobClaimBytes(problem));
  Outcome outcome;
  ASSERT_TRUE(intake_->Submit(*job, JobIntake::Call(), Record(&outcome)).ok());
  job->reset();
  ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_LE(RelativeFrobeniusError(outcome.c.data(), want), kTolerance);
  scheduler_->Stop();
  EXPECT_EQ(intake_->budget().used(), 0u) << "the claim ends with the job";
}

TEST_F(JobIntakeTest, BetaZeroNeedsNoC) {
  std::vector<float> a(6 * 4), b(4 * 5);
  FillRandom(a.data(), a.size(), 4);
  FillRandom(b.data(), b.size(), 5);
  auto job = intake_->AdmitComplete(Params(6, 5, 4, 0.0f), PiecesOf(a),
                                    PiecesOf(b), wire::Pieces());
  ASSERT_TRUE(job.ok()) << job.status();
  // Poison: C must be written, never read.
  std::fill((*job)->c(), (*job)->c() + 30,
            std::numeric_limits<float>::quiet_NaN());
  const std::vector<double> want =
      ReferenceGemm((*job)->problem(), a.data(), b.data(), nullptr);
  Outcome outcome;
  ASSERT_TRUE(intake_->Submit(*job, JobIntake::Call(), Record(&outcome)).ok());
  ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_LE(RelativeFrobeniusError(outcome.c.data(), want), kTolerance);
}

TEST_F(JobIntakeTest, ErrorsNameTheirField) {
  std::vector<float> four(4);
  auto bad_dim = intake_->Validate(Params(0, 2, 2, 0.0f));
  EXPECT_EQ(bad_dim.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_dim.status().message().find("params.m"), std::string::npos);
  v1::GemmParams unknown = Params(2, 2, 2, 0.0f);
  unknown.set_kernel("v9");
  EXPECT_EQ(intake_->Validate(unknown).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Operand counts: the stream's prefix comes first.
  auto short_b =
      intake_->AdmitComplete(Params(2, 2, 2, 0.0f), PiecesOf(four),
                             wire::Pieces(), wire::Pieces(), "job_id 5: ");
  EXPECT_EQ(short_b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(short_b.status().message().rfind("job_id 5: b: expected 16", 0), 0u)
      << short_b.status();
  EXPECT_EQ(intake_->budget().used(), 0u) << "nothing claimed for a bad job";
}

TEST_F(JobIntakeTest, AFullBudgetIsUnavailable) {
  JobIntake::Options options;
  options.limits.max_inflight_bytes = 2 * (48 + kJobBookkeepingBytes) + 4;
  options.limits.max_job_bytes = 48;
  scheduler_->Stop();
  Start(options);
  const JobSpec spec = SmallSpec();
  auto first = intake_->Allocate(spec);
  auto second = intake_->Allocate(spec);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(intake_->Allocate(spec).status().code(),
            absl::StatusCode::kUnavailable);
  first->reset();
  EXPECT_TRUE(intake_->Allocate(spec).ok()) << "room again once a job ends";
}

// Each job claims 1 KiB of bookkeeping with its bytes; the budget and a
// client's share still admit the largest job when they are its size.
TEST_F(JobIntakeTest, TheLargestJobFitsABudgetAndAShareOfItsSize) {
  JobIntake::Options options;
  options.limits.max_inflight_bytes = 48;
  options.limits.max_job_bytes = 48;
  options.client_shares.max_bytes_per_client = 48;
  scheduler_->Stop();
  Start(options);
  const JobSpec spec = SmallSpec();
  std::shared_ptr<ClientShare> share = intake_->shares().ShareOf("a");
  auto first = intake_->Allocate(spec, share);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(share->bytes(), JobClaimBytes(spec.problem));
  EXPECT_EQ(intake_->Allocate(spec).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(JobIntakeTest, TheCallsDeadlineAndCancellationReachTheJob) {
  const JobSpec spec = SmallSpec();
  auto late = intake_->Allocate(spec);
  ASSERT_TRUE(late.ok());
  JobIntake::Call past;
  past.deadline = absl::Now() - absl::Seconds(1);
  Outcome late_outcome;
  ASSERT_TRUE(intake_->Submit(*late, past, Record(&late_outcome)).ok());
  auto gone = intake_->Allocate(spec);
  ASSERT_TRUE(gone.ok());
  JobIntake::Call cancelled;
  cancelled.cancelled = [] { return true; };
  Outcome gone_outcome;
  ASSERT_TRUE(intake_->Submit(*gone, cancelled, Record(&gone_outcome)).ok());
  ASSERT_TRUE(
      late_outcome.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(
      gone_outcome.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(late_outcome.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(gone_outcome.status.code(), absl::StatusCode::kCancelled);
}

TEST_F(JobIntakeTest, ARefusedJobIsUntouchedAndItsCallbackNeverRuns) {
  scheduler_->StopAccepting();
  const JobSpec spec = SmallSpec();
  auto job = intake_->Allocate(spec);
  ASSERT_TRUE(job.ok());
  bool ran = false;
  absl::Status refused = intake_->Submit(
      *job, JobIntake::Call(), [&ran](GemmJob&, absl::Status) { ran = true; });
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  (*job)->Finish(absl::OkStatus());
  EXPECT_FALSE(ran);
  intake_->counts().CountRejected(absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(intake_->counts().rejected(), 1u);
}

}  // namespace
}  // namespace gemm::server
