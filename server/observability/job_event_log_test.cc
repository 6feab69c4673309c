#include "server/observability/job_event_log.h"

#include "gtest/gtest.h"

namespace gemm::server {
namespace {

TEST(JobEventLogTest, NamesTheClientTheJobItsShapeAndTheStatus) {
  GemmProblem problem{2, 3, 4, true, false};
  EXPECT_EQ(JobEventLog::Line("job refused", "10.0.0.7", "stream job 12",
                              &problem, absl::UnavailableError("budget full")),
            "job refused: stream job 12 of client 10.0.0.7 (" +
                problem.ToString() + "): UNAVAILABLE: budget full");
  EXPECT_EQ(JobEventLog::Line("job failed", "token:alice", "unary call",
                              nullptr, absl::InternalError("device lost")),
            "job failed: unary call of client token:alice: INTERNAL: device "
            "lost");
}

}  // namespace
}  // namespace gemm::server
