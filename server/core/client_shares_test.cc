#include "server/core/client_shares.h"

#include "gtest/gtest.h"
#include "server/core/gemm_job.h"

namespace gemm::server {
namespace {

TEST(ClientSharesTest, AClientPastItsBytesOrJobsWaitsForItsOwnJobs) {
  ClientShares shares({.max_bytes_per_client = 100, .max_jobs_per_client = 3});
  std::shared_ptr<ClientShare> share = shares.ShareOf("10.0.0.7");
  EXPECT_EQ(shares.ShareOf("10.0.0.7"), share) << "one share per client";
  ASSERT_TRUE(share->Take(60).ok());
  const absl::Status bytes = share->Take(41);
  EXPECT_TRUE(absl::IsUnavailable(bytes)) << bytes;
  EXPECT_NE(bytes.message().find("client 10.0.0.7 holds 60 bytes"),
            std::string::npos)
      << bytes;
  ASSERT_TRUE(share->Take(40).ok());
  ASSERT_TRUE(share->Take(0).ok());
  const absl::Status jobs = share->Take(0);
  EXPECT_TRUE(absl::IsUnavailable(jobs)) << jobs;
  EXPECT_NE(jobs.message().find("--max-client-jobs"), std::string::npos);
  // Another client is not held back.
  EXPECT_TRUE(shares.ShareOf("10.0.0.8")->Take(100).ok());
  share->Give(60);
  EXPECT_EQ(share->bytes(), 40u);
  EXPECT_EQ(share->jobs(), 2u);
  EXPECT_TRUE(share->Take(60).ok());
}

TEST(ClientSharesTest, ABudgetClaimHoldsTheClientsShareUntilItEnds) {
  ClientShares shares({.max_bytes_per_client = 100});
  InflightBudget budget(1000);
  std::shared_ptr<ClientShare> share = shares.ShareOf("a");
  {
    InflightBudget::Reservation first, second;
    ASSERT_TRUE(budget.Reserve(80, &first, share).ok());
    EXPECT_TRUE(absl::IsUnavailable(budget.Reserve(80, &second, share)));
    EXPECT_EQ(budget.used(), 80u) << "a refused claim takes nothing";
    InflightBudget::Reservation moved = std::move(first);
    EXPECT_EQ(share->bytes(), 80u) << "a move keeps the claim";
  }
  EXPECT_EQ(share->bytes(), 0u);
  EXPECT_EQ(share->jobs(), 0u);
  EXPECT_EQ(budget.used(), 0u);
  // The whole budget full refuses too, and gives the share back.
  InflightBudget small(50);
  InflightBudget::Reservation r;
  EXPECT_TRUE(absl::IsUnavailable(small.Reserve(60, &r, share)));
  EXPECT_EQ(share->bytes(), 0u);
  EXPECT_EQ(shares.clients(), 1u);
  share.reset();
  EXPECT_EQ(shares.clients(), 0u) << "a client with nothing held is forgotten";
}

// A job answered leaves the client's job count at once (MarkAnswered), its
// bytes when the claim ends: a client answered makes its next call at once.
TEST(ClientSharesTest, AClaimGivesItsJobBackWhenAnsweredAndItsBytesAtTheEnd) {
  ClientShares shares({.max_jobs_per_client = 1});
  int notified = 0;
  InflightBudget budget(1000, [&] { ++notified; });
  std::shared_ptr<ClientShare> share = shares.ShareOf("a");
  InflightBudget::Reservation first, second;
  ASSERT_TRUE(budget.Reserve(80, &first, share).ok());
  EXPECT_TRUE(absl::IsUnavailable(budget.Reserve(10, &second, share)));
  first.MarkAnswered();
  EXPECT_EQ(notified, 1) << "a stream waiting for the share is woken";
  EXPECT_EQ(share->jobs(), 0u);
  EXPECT_EQ(share->answers(), 1u);
  EXPECT_EQ(share->bytes(), 80u) << "the bytes stay until the claim ends";
  first.MarkAnswered();
  EXPECT_EQ(notified, 1) << "once only";
  ASSERT_TRUE(budget.Reserve(10, &second, share).ok());
  EXPECT_EQ(share->jobs(), 1u);
  {
    // Ending the answered claim (moved first) takes no job of another's.
    InflightBudget::Reservation moved = std::move(first);
    first = InflightBudget::Reservation();
  }
  EXPECT_EQ(share->jobs(), 1u);
  EXPECT_EQ(share->answers(), 0u);
  EXPECT_EQ(share->bytes(), 10u);
  EXPECT_EQ(budget.used(), 10u);
}

// Answers a client does not read stay bounded, at its job share plus
// kAnswersLag, which a client calling again as soon as answered never
// meets.
TEST(ClientSharesTest, AnswersNotYetSentAreBoundedApartFromJobs) {
  ClientShare share("a", 0, 2);
  const uint64_t most = 2 + ClientShare::kAnswersLag;
  for (uint64_t i = 0; i < most; ++i) {
    ASSERT_TRUE(share.Take(1).ok()) << i;
    share.Answered();
  }
  EXPECT_EQ(share.jobs(), 0u);
  EXPECT_EQ(share.answers(), most);
  const absl::Status unread = share.Take(1);
  EXPECT_TRUE(absl::IsUnavailable(unread)) << unread;
  EXPECT_NE(unread.message().find("66 answers not yet sent"), std::string::npos)
      << unread;
  share.Give(1, /*answered=*/true);
  EXPECT_TRUE(share.Take(1).ok()) << "an answer sent makes room";
  EXPECT_TRUE(share.Take(1).ok());
  EXPECT_NE(share.Take(1).message().find("holds 2 jobs"), std::string::npos);
}

}  // namespace
}  // namespace gemm::server
