#include "client/cli/load_charts.h"

#include <string>

#include "gtest/gtest.h"

namespace gemm::client {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

LoadReport Report() {
  LoadReport r;
  r.mode = "concurrency";
  r.concurrency = 8;
  r.connections = 2;
  r.shapes = "128x128x128:0.5,<b>&";
  r.ok = 1000;
  r.latency_ms.p50 = 1.5;
  r.latency_ms.p99 = 4.0;
  r.latency_ms.p999 = 9.0;
  double upper = 0.5;
  for (int i = 0; i < 40; ++i) {
    upper *= 1.2;
    r.histogram_upper_ms.push_back(upper);
    r.histogram_count.push_back(i < 20 ? i * 3 : 60 - i);
  }
  for (int s = 0; s < 7; ++s) {
    LoadReport::Second second;
    second.t_s = s;
    second.ok = 140 + s;
    second.errors = s == 3 ? 5 : 0;
    second.p50_ms = 1.4 + 0.1 * s;
    second.p99_ms = 3.5 + 0.2 * s;
    r.timeline.push_back(second);
  }
  return r;
}

TEST(LoadChartsTest, TheLatencyChartHasABarPerBucketAndThePercentiles) {
  const std::string svg = LatencyChartSvg(Report());
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(Count(svg, "class=\"bucket\""), 40u);
  EXPECT_NE(svg.find("p50 1.5"), std::string::npos);
  EXPECT_NE(svg.find("p99 4"), std::string::npos);
  EXPECT_NE(svg.find("p99.9 9"), std::string::npos);
  // The title is escaped.
  EXPECT_EQ(svg.find("<b>"), std::string::npos);
  EXPECT_NE(svg.find("&lt;b&gt;&amp;"), std::string::npos);
}

TEST(LoadChartsTest, TheThroughputChartHasAPointPerSecondPerLine) {
  const std::string svg = ThroughputChartSvg(Report());
  for (const char* line :
       {"class=\"ok\"", "class=\"errors\"", "class=\"p50\"", "class=\"p99\""}) {
    const size_t at = svg.find(line);
    ASSERT_NE(at, std::string::npos) << line;
    const size_t points = svg.find("points=\"", at);
    const size_t end = svg.find('"', points + 8);
    EXPECT_EQ(Count(svg.substr(points, end - points), ","), 7u) << line;
  }
}

TEST(LoadChartsTest, AnEmptyRunSaysSo) {
  LoadReport r;
  EXPECT_NE(LatencyChartSvg(r).find("no OK jobs"), std::string::npos);
  EXPECT_NE(ThroughputChartSvg(r).find("no measured second"),
            std::string::npos);
}

}  // namespace
}  // namespace gemm::client
