#include "server/rpc/stream_outbox.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "server/core/client_shares.h"
#include "server/core/gemm_job.h"
#include "server/observability/job_counts.h"

namespace gemm::server {
namespace {

// gRPC may hold a job's result chunks (and with them the job) after the
// client has the job's JobEnd; the client's next job must not find the
// answered one in its share.
TEST(StreamOutboxTest, AJobLeavesItsClientsJobCountWithItsLastMessage) {
  ClientShares shares({.max_jobs_per_client = 1});
  InflightBudget budget(1 << 20);
  std::shared_ptr<ClientShare> share = shares.ShareOf("a");
  InflightBudget::Reservation claim;
  ASSERT_TRUE(budget.Reserve(3000, &claim, share).ok());
  auto job = std::make_shared<GemmJob>(
      JobSpec{.problem = {.m = 10, .n = 30, .k = 1}}, std::move(claim));
  for (uint64_t i = 0; i < job->problem().c_elements(); ++i) {
    job->c()[i] = 0.5f + i;
  }
  JobCounts counts(nullptr);
  // 1200 bytes of C in chunks of 512: three chunks, then the JobEnd.
  StreamOutbox outbox(512, &counts);
  outbox.PushResult(7, std::move(job), /*inline_result=*/false);
  std::vector<grpc::ByteBuffer> in_grpc;
  for (int chunk = 0; chunk < 3; ++chunk) {
    ASSERT_FALSE(outbox.empty());
    in_grpc.push_back(outbox.Next());
    EXPECT_EQ(share->jobs(), 1u) << "chunk " << chunk << " is not the last";
  }
  ASSERT_FALSE(outbox.empty());
  grpc::ByteBuffer end = outbox.Next();
  EXPECT_TRUE(outbox.empty());
  EXPECT_EQ(share->jobs(), 0u) << "the JobEnd is on its way";
  EXPECT_EQ(share->bytes(), 3000u) << "the chunks gRPC holds still count";
  InflightBudget::Reservation next;
  EXPECT_TRUE(budget.Reserve(100, &next, share).ok());
  in_grpc.clear();
  EXPECT_EQ(share->bytes(), 100u);
  EXPECT_EQ(budget.used(), 100u);
}

}  // namespace
}  // namespace gemm::server
