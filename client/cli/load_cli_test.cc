#include "client/cli/load_cli.h"

#include <vector>

#include "CLI/CLI.hpp"
#include "gtest/gtest.h"

namespace gemm::client {
namespace {

TEST(LoadCliTest, DashNIsNotTheCount) {
  // -n is N in `run` and `kernels`: load has --count only.
  CLI::App app;
  LoadFlags flags;
  AddLoadFlags(app.add_subcommand("load"), &flags);
  std::vector<std::string> args = {"7", "-n", "load"};  // parse() reverses
  EXPECT_THROW(app.parse(args), CLI::ParseError);

  CLI::App app2;
  LoadFlags flags2;
  AddLoadFlags(app2.add_subcommand("load"), &flags2);
  std::vector<std::string> args2 = {"7", "--count", "load"};
  app2.parse(args2);
  EXPECT_EQ(flags2.count, 7u);
}

TEST(LoadCliTest, SweepRanges) {
  auto c = ParseSweepRange("--concurrency-range", "1:10:4", true);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, (std::vector<double>{1, 5, 9, 10}));
  auto whole = ParseSweepRange("--concurrency-range", "2:4", true);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(*whole, (std::vector<double>{2, 3, 4}));
  auto rate = ParseSweepRange("--rate-range", "100:300", false);
  ASSERT_TRUE(rate.ok());
  EXPECT_EQ(*rate, (std::vector<double>{100, 200, 300}));
  auto one = ParseSweepRange("--rate-range", "50:50", false);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, (std::vector<double>{50}));
  // No sum of steps: 0.3 is 0.3.
  auto tenths = ParseSweepRange("--rate-range", "0.1:0.7:0.1", false);
  ASSERT_TRUE(tenths.ok());
  ASSERT_EQ(tenths->size(), 7u);
  EXPECT_EQ((*tenths)[2], 0.1 + 2 * 0.1);
  EXPECT_EQ(tenths->back(), 0.7);
  // Exactly 100 steps is allowed, 101 is not.
  auto hundred = ParseSweepRange("--rate-range", "1.1:110:1.1", false);
  ASSERT_TRUE(hundred.ok()) << hundred.status();
  EXPECT_EQ(hundred->size(), 100u);
  EXPECT_FALSE(ParseSweepRange("--concurrency-range", "1:101", true).ok());
  EXPECT_TRUE(ParseSweepRange("--concurrency-range", "1:100", true).ok());
  for (const char* bad : {"8", "0:4", "4:2", "1:2:0", "a:4", "1.5:4", "1:1000",
                          "1:2:3:4", "1:4000000000:1000000000"}) {
    auto r = ParseSweepRange("--concurrency-range", bad, true);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("--concurrency-range"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace gemm::client
