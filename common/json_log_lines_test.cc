#include "common/json_log_lines.h"

#include <memory>
#include <sstream>

#include "gtest/gtest.h"
#include "spdlog/sinks/ostream_sink.h"

namespace gemm {
namespace {

TEST(JsonLogLinesTest, EscapesWhatWouldBreakALine) {
  EXPECT_EQ(JsonEscape("plain"), "plain");
  EXPECT_EQ(JsonEscape("a \"q\" \\ b"), "a \\\"q\\\" \\\\ b");
  EXPECT_EQ(JsonEscape("two\nlines\t\r"), "two\\nlines\\t\\r");
  EXPECT_EQ(JsonEscape(std::string("nul\0bell\a", 9)), "nul\\u0000bell\\u0007");
  EXPECT_EQ(JsonEscape("caf\xc3\xa9"), "caf\xc3\xa9") << "UTF-8 stays";
  EXPECT_EQ(JsonEscape("bad \xff\xc3"), "bad \\ufffd\\ufffd");
}

TEST(JsonLogLinesTest, OneObjectPerLine) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("t", sink);
  UseJsonLogLines(logger);
  logger.warn("kernel 'x\"y' unknown\nsecond line");
  const std::string line = out.str();
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
  EXPECT_EQ(line.rfind("{\"time\":\"", 0), 0u) << line;
  EXPECT_NE(line.find(",\"level\":\"warning\","), std::string::npos) << line;
  EXPECT_NE(line.find(",\"msg\":\"kernel 'x\\\"y' unknown\\nsecond line\"}"),
            std::string::npos)
      << line;
}

}  // namespace
}  // namespace gemm
