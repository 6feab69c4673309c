#include "client/load_generator.h"

#include "gtest/gtest.h"

namespace gemm::client {
namespace {

TEST(ParseShapeMixTest, ReadsShapesAndWeights) {
  auto shapes = ParseShapeMix("128x128x128:0.7,1024x512x1:0.3,8x8x0");
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  ASSERT_EQ(shapes->size(), 3u);
  EXPECT_EQ((*shapes)[0].problem.m, 128u);
  EXPECT_DOUBLE_EQ((*shapes)[0].weight, 0.7);
  EXPECT_EQ((*shapes)[1].problem.n, 512u);
  EXPECT_EQ((*shapes)[1].problem.k, 1u);
  EXPECT_DOUBLE_EQ((*shapes)[2].weight, 1.0);
}

TEST(ParseShapeMixTest, RejectsMalformedEntries) {
  for (const char* bad : {"", "128x128", "0x1x1", "1x1x1:0", "1x1x1:-2",
                          "axbxc", "1x1x1:0.5:2"}) {
    EXPECT_FALSE(ParseShapeMix(bad).ok()) << bad;
  }
}

TEST(SummarizeTest, NearestRankPercentiles) {
  std::vector<double> values;
  for (int i = 1000; i >= 1; --i) values.push_back(i);
  Distribution d = Summarize(values);
  EXPECT_EQ(d.count, 1000u);
  EXPECT_EQ(d.min, 1);
  EXPECT_EQ(d.max, 1000);
  EXPECT_DOUBLE_EQ(d.mean, 500.5);
  EXPECT_EQ(d.p50, 500);
  EXPECT_EQ(d.p90, 900);
  EXPECT_EQ(d.p95, 950);
  EXPECT_EQ(d.p99, 990);
  EXPECT_EQ(d.p999, 999);
}

TEST(SummarizeTest, EmptyIsAllZero) {
  Distribution d = Summarize({});
  EXPECT_EQ(d.count, 0u);
  EXPECT_EQ(d.max, 0);
}

TEST(FormatReportTest, JsonAndCsvCarryTheCounts) {
  LoadReport report;
  report.mode = "concurrency";
  report.count = 7;
  report.ok = 5;
  report.errors = 2;
  report.errors_by_code["UNAVAILABLE"] = 2;
  report.error_sample["UNAVAILABLE"] = "queue \"full\"";
  const std::string json = FormatReportJson(report);
  EXPECT_NE(json.find("\"count\": 7,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"errors_by_code\": {\"UNAVAILABLE\": 2}"),
            std::string::npos);
  EXPECT_NE(json.find("queue \\\"full\\\""), std::string::npos);
  const std::string csv = FormatReportCsv(report);
  EXPECT_NE(csv.find("UNAVAILABLE=2"), std::string::npos) << csv;
  EXPECT_NE(FormatReportText(report).find("UNAVAILABLE"), std::string::npos);
}

}  // namespace
}  // namespace gemm::client
