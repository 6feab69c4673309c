#include "client/cli/load_report.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gemm::client {
namespace {

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

LoadReport SampleReport() {
  LoadReport report;
  report.mode = "concurrency";
  report.targets = {"host:1", "host:2"};
  report.count = 7;
  report.ok = 5;
  report.errors = 2;
  report.errors_by_code["UNAVAILABLE"] = 2;
  report.error_sample["UNAVAILABLE"] = "queue \"full\"\n";
  report.ok_by_target["host:1"] = 5;
  report.latency_ms.p999 = 2.5;
  report.server_ms.mean = 1.25;
  report.timeline.push_back({.t_s = 0, .ok = 5, .errors = 2, .p50_ms = 1});
  report.histogram_upper_ms = {1, 2};
  report.histogram_count = {3, 2};
  return report;
}

// The JSON is valid (quotes and newlines in messages escaped) and carries
// the field names that bench/ scripts and tests/ read.
TEST(FormatReportTest, JsonParsesWithTheReadersFieldNames) {
  LoadReport report = SampleReport();
  nlohmann::json json = nlohmann::json::parse(FormatReportJson(report));
  EXPECT_EQ(json["mode"], "concurrency");
  EXPECT_EQ(json["targets"], nlohmann::json({"host:1", "host:2"}));
  EXPECT_EQ(json["count"], 7);
  EXPECT_EQ(json["ok"], 5);
  EXPECT_EQ(json["errors"], 2);
  EXPECT_EQ(json["errors_by_code"]["UNAVAILABLE"], 2);
  EXPECT_EQ(json["error_sample"]["UNAVAILABLE"], "queue \"full\"\n");
  EXPECT_EQ(json["ok_by_target"]["host:1"], 5);
  EXPECT_EQ(json["latency_ms"]["p999"], 2.5);
  EXPECT_EQ(json["server_ms"]["total"]["mean"], 1.25);
  EXPECT_EQ(json["timeline"][0]["ok"], 5);
  EXPECT_EQ(json["histogram"]["count"], nlohmann::json({3, 2}));
  // Without the server's counts, no server_jobs_* fields.
  EXPECT_FALSE(json.contains("server_jobs_ok"));
  EXPECT_FALSE(json.contains("server_counts_agree"));
  report.have_server_counts = true;
  report.server_jobs_ok = 9;
  json = nlohmann::json::parse(FormatReportJson(report));
  EXPECT_EQ(json["server_jobs_ok"], 9);
  EXPECT_EQ(json["server_jobs_rejected"], 0);
  EXPECT_EQ(json["server_counts_agree"], false);
}

TEST(FormatReportTest, JsonCarriesTheWholeRunsCounts) {
  LoadReport report = SampleReport();
  report.sent = 9;
  report.sent_by_call = {{"stream", 6}, {"unary", 2}, {"own_stream", 1}};
  report.answered_ok = 7;
  report.answered_errors = 1;
  nlohmann::json json = nlohmann::json::parse(FormatReportJson(report));
  EXPECT_EQ(json["sent"], 9);
  EXPECT_EQ(json["sent_by_call"]["unary"], 2);
  EXPECT_EQ(json["answered_ok"], 7);
  EXPECT_EQ(json["answered_errors"], 1);
  EXPECT_NE(FormatReportText(report).find(
                "sent 9 (own_stream 1, stream 6, unary 2), answered 8 (ok 7, "
                "errors 1); 1 LOST"),
            std::string::npos)
      << FormatReportText(report);
}

// The server saw every job the client sent, and as many OK as the client
// got back OK; split jobs are counted in parts, so only the total holds.
TEST(ServerCountsAgreeTest, ComparesTotalsAndOkCounts) {
  LoadReport report;
  EXPECT_FALSE(ServerCountsAgree(report)) << "no server counts";
  report.have_server_counts = true;
  report.sent = report.server_side_jobs = 10;
  report.answered_ok = 9;
  report.answered_errors = 1;
  report.server_jobs_ok = 9;
  report.server_jobs_rejected = 1;
  EXPECT_TRUE(ServerCountsAgree(report));
  report.server_jobs_ok = 8;
  report.server_jobs_failed = 1;
  EXPECT_FALSE(ServerCountsAgree(report)) << "an OK the server did not see";
  report.server_jobs_ok = 10;
  report.server_jobs_failed = 0;
  EXPECT_FALSE(ServerCountsAgree(report)) << "a job the client did not send";
  report.server_side_jobs = 40;  // 10 jobs split in 4
  report.server_jobs_ok = 36;
  report.server_jobs_rejected = 4;
  EXPECT_TRUE(ServerCountsAgree(report));
}

// tests/load_test.cc and tests/round_robin_test.cc read numbers with
// regular expressions: `"key": number`.
TEST(FormatReportTest, JsonKeepsKeyColonSpaceNumber) {
  const std::string json = FormatReportJson(SampleReport());
  EXPECT_NE(json.find("\"count\": 7,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"UNAVAILABLE\": 2"), std::string::npos) << json;
  EXPECT_EQ(json.back(), '\n');
}

TEST(FormatReportTest, CsvAndTextCarryTheCounts) {
  const LoadReport report = SampleReport();
  const std::string csv = FormatReportCsv(report);
  EXPECT_EQ(csv.rfind("mode,connections,", 0), 0u) << csv;
  EXPECT_NE(csv.find("UNAVAILABLE=2"), std::string::npos) << csv;
  const std::string text = FormatReportText(report);
  EXPECT_NE(text.find("count         7 (ok 5, errors 2)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("UNAVAILABLE"), std::string::npos);
}

TEST(FormatProgressLineTest, RedrawsOnATerminalOnly) {
  LoadProgress progress{.elapsed_s = 3,
                        .warming_up = true,
                        .sent = 10,
                        .completed = 8,
                        .errors = 1,
                        .in_flight = 2};
  EXPECT_EQ(FormatProgressLine(progress, false),
            "[    3 s] warm-up sent 10, done 8, errors 1, in flight 2 | last "
            "1 s: 0 ok/s, p50 0.000 ms, p99 0.000 ms\n");
  const std::string redraw = FormatProgressLine(progress, true);
  EXPECT_EQ(redraw.front(), '\r');
  EXPECT_EQ(redraw.substr(redraw.size() - 3), "\033[K");
}

}  // namespace
}  // namespace gemm::client
