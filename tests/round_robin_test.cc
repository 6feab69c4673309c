// Client-side round robin and retries across two real gemm-server
// processes. To tell the servers apart by their answers alone, server A
// accepts dimensions up to 100 only: a 200x200x200 job is OK from B and
// RESOURCE_EXHAUSTED from A, so every result shows who served it.
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/lib/gemm_client.h"
#include "common/reference_gemm.h"
#include "gtest/gtest.h"
#include "tests/server_process.h"

namespace gemm {
namespace {

using client::GemmArgs;
using client::GemmClient;
using testing::ServerProcess;

constexpr uint32_t kDim = 200;

struct Operands {
  std::vector<float> a, b;
  Operands() : a(kDim * kDim), b(kDim * kDim) {
    FillRandom(a.data(), a.size(), 1);
    FillRandom(b.data(), b.size(), 2);
  }
  GemmArgs Args() const {
    return GemmArgs{
        .problem = {kDim, kDim, kDim}, .a = a.data(), .b = b.data()};
  }
};

class RoundRobinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(small_.Start().ok());
    ASSERT_TRUE(large_.Start().ok());
  }
  std::unique_ptr<GemmClient> Connect(int max_attempts = 1) {
    GemmClient::Options options;
    options.targets = {small_.address(), large_.address()};
    options.retry.max_attempts = max_attempts;
    options.retry.initial_backoff = absl::Milliseconds(5);
    auto client = GemmClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return std::move(*client);
  }
  ServerProcess small_{{"--max-dim", "100"}};  // "A"
  ServerProcess large_;                        // "B"
  Operands operands_;
};

TEST_F(RoundRobinTest, UnaryCallsAlternateBetweenTheServers) {
  auto client = Connect();
  std::vector<float> c(kDim * kDim);
  int ok = 0, exhausted = 0;
  for (int i = 0; i < 10; ++i) {
    auto timing = client->Gemm(operands_.Args(), c.data());
    if (timing.ok()) {
      ++ok;
    } else {
      EXPECT_EQ(timing.status().code(), absl::StatusCode::kResourceExhausted)
          << timing.status();
      ++exhausted;
    }
  }
  EXPECT_EQ(ok, 5);
  EXPECT_EQ(exhausted, 5);
}

// One target naming several addresses (as DNS does for a headless
// Service) is balanced over them too, not sent to the first alone.
TEST_F(RoundRobinTest, ATargetOfSeveralAddressesIsBalanced) {
  GemmClient::Options options;
  options.target =
      absl::StrCat("ipv4:", small_.address(), ",", large_.address());
  auto client = GemmClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<float> c(kDim * kDim);
  int ok = 0;
  for (int i = 0; i < 10; ++i)
    ok += (*client)->Gemm(operands_.Args(), c.data()).ok();
  EXPECT_GT(ok, 0) << "some jobs reached the server that takes them";
  EXPECT_LT(ok, 10) << "and some the other";
}

TEST_F(RoundRobinTest, StreamsSpreadOverTheServers) {
  auto client = Connect();
  auto first = client->OpenStream();
  auto second = client->OpenStream();
  EXPECT_EQ(first->target(), small_.address());
  EXPECT_EQ(second->target(), large_.address());
  std::vector<float> c1(kDim * kDim), c2(kDim * kDim);
  absl::Status s1, s2;
  first->Submit(operands_.Args(), c1.data(),
                [&](absl::StatusOr<v1::Timing> t) { s1 = t.status(); });
  second->Submit(operands_.Args(), c2.data(),
                 [&](absl::StatusOr<v1::Timing> t) { s2 = t.status(); });
  EXPECT_TRUE(first->Finish().ok());
  EXPECT_TRUE(second->Finish().ok());
  EXPECT_EQ(s1.code(), absl::StatusCode::kResourceExhausted) << s1;
  EXPECT_TRUE(s2.ok()) << s2;
}

TEST_F(RoundRobinTest, RetriesFailOverFromAServerThatIsGone) {
  // Only B serves 200^3, and A is now gone: without retries every call that
  // lands on A fails UNAVAILABLE; with them, each moves on to B.
  EXPECT_EQ(small_.Stop(SIGKILL), 128 + SIGKILL);
  std::vector<float> c(kDim * kDim);
  {
    auto client = Connect(/*max_attempts=*/1);
    int unavailable = 0;
    for (int i = 0; i < 6; ++i) {
      auto timing = client->Gemm(operands_.Args(), c.data());
      if (!timing.ok()) {
        EXPECT_EQ(timing.status().code(), absl::StatusCode::kUnavailable);
        ++unavailable;
      }
    }
    EXPECT_EQ(unavailable, 3);
  }
  auto client = Connect(/*max_attempts=*/3);
  std::vector<std::future<absl::StatusOr<v1::Timing>>> results;
  std::vector<std::vector<float>> outs(6, std::vector<float>(kDim * kDim));
  for (int i = 0; i < 6; ++i) {
    results.push_back(client->GemmFuture(operands_.Args(), outs[i].data()));
  }
  for (auto& result : results) {
    absl::StatusOr<v1::Timing> timing = result.get();
    EXPECT_TRUE(timing.ok()) << timing.status();
  }
}

TEST(StreamRetryTest, QueueFullJobsAreResentOnTheStream) {
  ServerProcess server({"--max-queued-jobs", "1", "--threads", "1"});
  ASSERT_TRUE(server.Start().ok());
  GemmClient::Options options;
  options.target = server.address();
  options.retry.max_attempts = 200;
  options.retry.initial_backoff = absl::Milliseconds(2);
  options.retry.max_backoff = absl::Milliseconds(20);
  auto client = GemmClient::Create(options);
  ASSERT_TRUE(client.ok());
  std::vector<float> big_a(500 * 500), big_b(500 * 500), big_c(500 * 500);
  std::vector<float> a(64), b(64);
  std::vector<std::vector<float>> outs(8, std::vector<float>(64));
  std::vector<absl::Status> statuses(9);
  auto stream = (*client)->OpenStream();
  stream->Submit(
      GemmArgs{
          .problem = {500, 500, 500}, .a = big_a.data(), .b = big_b.data()},
      big_c.data(),
      [&](absl::StatusOr<v1::Timing> t) { statuses[8] = t.status(); });
  for (int i = 0; i < 8; ++i) {
    stream->Submit(GemmArgs{.problem = {8, 8, 8}, .a = a.data(), .b = b.data()},
                   outs[i].data(), [&, i](absl::StatusOr<v1::Timing> t) {
                     statuses[i] = t.status();
                   });
  }
  ASSERT_TRUE(stream->Finish().ok());
  for (const absl::Status& status : statuses)
    EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// The CLI's per-target counts come from real responses: all 200^3 jobs
// served by A fail, all served by B succeed, and together they are the count
// (--allow-errors: the failures are the point).
TEST_F(RoundRobinTest, LoadReportsPerTargetCounts) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string json = absl::StrCat(tmp ? tmp : "/tmp", "/rr.json");
  const std::string command = absl::StrCat(
      testing::RunfilePath("client/gemm-client"), " load -q -s ",
      small_.address(), ",", large_.address(),
      " --shapes 200x200x200 -c 8 --count 100 --warmup-s 0 --connections 2"
      " --allow-errors --json ",
      json, " > /dev/null");
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::ifstream in(json);
  std::stringstream text;
  text << in.rdbuf();
  const std::string report = text.str();
  auto number = [&report](const std::string& pattern) {
    std::smatch match;
    EXPECT_TRUE(std::regex_search(report, match, std::regex(pattern)))
        << pattern << "\n"
        << report;
    return match.size() > 1 ? std::stoi(match[1]) : -1;
  };
  const std::string a = small_.address(), b = large_.address();
  const int a_ok = number("\"ok_by_target\": \\{[^}]*\"" + a + "\": (\\d+)");
  const int b_ok = number("\"ok_by_target\": \\{[^}]*\"" + b + "\": (\\d+)");
  const int a_err =
      number("\"errors_by_target\": \\{[^}]*\"" + a + "\": (\\d+)");
  const int b_err =
      number("\"errors_by_target\": \\{[^}]*\"" + b + "\": (\\d+)");
  EXPECT_EQ(a_ok, 0);
  EXPECT_EQ(b_err, 0);
  // Both servers served. The split need not be even: each connection has
  // its own dispatcher, and the one whose jobs fail fast claims more of the
  // count.
  EXPECT_GT(a_err, 0);
  EXPECT_GT(b_ok, 0);
  EXPECT_EQ(a_ok + a_err + b_ok + b_err, 100);
  EXPECT_EQ(number("\"RESOURCE_EXHAUSTED\": (\\d+)"), a_err);
}

}  // namespace
}  // namespace gemm
