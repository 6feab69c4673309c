#include "common/library_logs.h"

#include <memory>
#include <sstream>
#include <string>

#include "grpc/support/log.h"
#include "gtest/gtest.h"
#include "proto/gemm.pb.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace gemm {
namespace {

TEST(LogRateLimiterTest, ABurstThenTheRateAndTheDroppedCount) {
  absl::Time now = absl::UnixEpoch();
  LogRateLimiter limiter({.burst = 3, .lines_per_second = 2},
                         [&now] { return now; });
  uint64_t dropped = 99;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(limiter.Admit(&dropped));
    EXPECT_EQ(dropped, 0u);
  }
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(limiter.Admit(&dropped));
  now += absl::Milliseconds(500);  // one token
  ASSERT_TRUE(limiter.Admit(&dropped));
  EXPECT_EQ(dropped, 10u) << "the first line after a drop says how many";
  EXPECT_FALSE(limiter.Admit(&dropped));
  now += absl::Hours(1);  // refills to the burst, no more
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Admit(&dropped));
  EXPECT_FALSE(limiter.Admit(&dropped));
}

// A GemmParams whose kernel (a string field) is not valid UTF-8: protobuf
// logs an error line each time it parses one.
std::string InvalidUtf8Params() {
  v1::GemmParams params;
  params.set_m(1);
  std::string bytes = params.SerializeAsString();
  bytes += std::string("\x42\x02\xff\xfe", 4);  // field 8 (kernel), 2 bytes
  return bytes;
}

class LibraryLogsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    previous_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("t", sink));
  }
  void TearDown() override { spdlog::set_default_logger(previous_); }
  int Lines(const std::string& text) {
    int n = 0;
    for (size_t at = out_.str().find(text); at != std::string::npos;
         at = out_.str().find(text, at + 1)) {
      ++n;
    }
    return n;
  }

  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

// Issue 12, item 5: 1.88 MB of requests gave 21.6 MB of protobuf log lines,
// even with --log-level off.
TEST_F(LibraryLogsTest, ProtobufLinesAreRateLimitedAndObeyTheLevel) {
  spdlog::set_level(spdlog::level::info);
  RouteLibraryLogs({.burst = 5, .lines_per_second = 0.001});
  const std::string bytes = InvalidUtf8Params();
  v1::GemmParams parsed;
  for (int i = 0; i < 1000; ++i) parsed.ParseFromString(bytes);
  EXPECT_EQ(Lines("[protobuf]"), 5) << out_.str();
  EXPECT_NE(out_.str().find("invalid UTF-8"), std::string::npos) << out_.str();

  out_.str("");
  spdlog::set_level(spdlog::level::off);
  for (int i = 0; i < 100; ++i) parsed.ParseFromString(bytes);
  EXPECT_EQ(out_.str(), "");
}

TEST_F(LibraryLogsTest, GrpcLinesGoThroughSpdlog) {
  spdlog::set_level(spdlog::level::info);
  RouteLibraryLogs();
  gpr_log(GPR_ERROR, "a test line %d", 7);
  EXPECT_EQ(Lines("[grpc] a test line 7"), 1) << out_.str();
  spdlog::set_level(spdlog::level::off);
  RouteLibraryLogs();
  gpr_log(GPR_ERROR, "not shown");
  EXPECT_EQ(Lines("not shown"), 0);
}

TEST(LibraryLogLineTest, SaysHowManyLinesWereDropped) {
  EXPECT_EQ(LibraryLogLine("grpc", "text\n", 0), "[grpc] text");
  EXPECT_EQ(LibraryLogLine("protobuf", "x", 3),
            "[protobuf] x (3 earlier line(s) of this library dropped by the "
            "rate limit)");
}

}  // namespace
}  // namespace gemm
