#include "client/cli/load_verdict.h"

#include "gtest/gtest.h"

namespace gemm::client {
namespace {

// A run of 100 jobs, all OK, that the server counted alike.
LoadReport Clean() {
  LoadReport r;
  r.sent = 100;
  r.answered_ok = 100;
  r.count = 90;
  r.ok = 90;
  r.warmup_jobs = 10;
  r.have_server_counts = true;
  r.server_side_jobs = 100;
  r.server_jobs_ok = 100;
  return r;
}

TEST(LoadVerdictTest, ACleanRunPasses) {
  const LoadVerdict v = JudgeLoad(Clean(), false);
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_TRUE(v.failures.empty());
}

TEST(LoadVerdictTest, AClosedPortFailsEvenWithErrorsAllowed) {
  // What 82891df reported with rc 0: every job UNAVAILABLE.
  LoadReport r;
  r.sent = 50000;
  r.answered_errors = 50000;
  r.count = 45000;
  r.errors = 45000;
  r.errors_by_code["UNAVAILABLE"] = 45000;
  r.error_sample["UNAVAILABLE"] = "failed to connect to all addresses";
  for (bool allow : {false, true}) {
    const LoadVerdict v = JudgeLoad(r, allow);
    EXPECT_EQ(v.exit_code, kLoadFailedJobs);
    ASSERT_FALSE(v.failures.empty());
    EXPECT_NE(v.failures[0].find("no job succeeded"), std::string::npos);
    EXPECT_NE(v.failures[0].find("failed to connect"), std::string::npos);
  }
}

TEST(LoadVerdictTest, FailedJobsFailUnlessAllowed) {
  LoadReport r = Clean();
  r.answered_ok = 84;
  r.answered_errors = 16;
  r.errors = 16;
  r.ok = 74;
  r.errors_by_code["RESOURCE_EXHAUSTED"] = 16;
  r.error_sample["RESOURCE_EXHAUSTED"] =
      "127.0.0.1 holds 32 connections (--max-client-connections 32)";
  r.server_jobs_ok = 84;
  r.server_side_jobs = 84;  // the refused ones never reached it
  const LoadVerdict strict = JudgeLoad(r, false);
  EXPECT_EQ(strict.exit_code, kLoadFailedJobs);
  ASSERT_FALSE(strict.failures.empty());
  EXPECT_NE(strict.failures[0].find("16 of 100 jobs failed"),
            std::string::npos);
  EXPECT_NE(strict.failures[0].find("--max-client-connections 32"),
            std::string::npos);
  EXPECT_EQ(JudgeLoad(r, true).exit_code, 0);
}

TEST(LoadVerdictTest, CountsThatDisagreeFail) {
  LoadReport r = Clean();
  r.server_jobs_ok = 99;
  r.server_jobs_failed = 0;
  const LoadVerdict v = JudgeLoad(r, false);
  EXPECT_EQ(v.exit_code, kLoadFailedJobs);
  ASSERT_EQ(v.failures.size(), 1u);
  EXPECT_NE(v.failures[0].find("disagree"), std::string::npos);
  // Allowing errors does not excuse it when there were none.
  EXPECT_EQ(JudgeLoad(r, true).exit_code, kLoadFailedJobs);
}

TEST(LoadVerdictTest, ALostJobFails) {
  LoadReport r = Clean();
  r.sent = 101;
  r.server_side_jobs = 101;
  r.server_jobs_ok = 100;
  r.server_jobs_failed = 1;
  const LoadVerdict v = JudgeLoad(r, true);
  EXPECT_EQ(v.exit_code, kLoadFailedJobs);
  EXPECT_NE(v.failures[0].find("1 of 101 jobs sent never got an answer"),
            std::string::npos);
}

TEST(LoadVerdictTest, WrongResultsComeFirst) {
  LoadReport r = Clean();
  r.verified = 10;
  r.verify_failures = 1;
  r.answered_errors = 1;
  r.answered_ok = 99;
  r.sent = 100;
  const LoadVerdict v = JudgeLoad(r, false);
  EXPECT_EQ(v.exit_code, kLoadWrongResults);
  EXPECT_GE(v.failures.size(), 2u);
}

}  // namespace
}  // namespace gemm::client
