#include "client/cli/load_summary.h"

#include "gtest/gtest.h"

namespace gemm::client {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

JobRecord Ok(Clock::time_point start, int ms, int shape, int target) {
  JobRecord r;
  r.start = start;
  r.end = start + milliseconds(ms);
  r.shape = shape;
  r.target = target;
  r.measured = true;
  r.timing.set_queue_ms(0.5);
  r.timing.set_compute_ms(2);
  r.timing.set_server_ms(3);
  r.timing.set_batch_size(2);
  r.timing.set_device("cpu");
  return r;
}

TEST(LoadSummaryTest, CountsMeasuredJobsOnly) {
  const Clock::time_point t0 = Clock::now();
  LoadSummary summary({{.m = 10, .n = 10, .k = 10}, {.m = 2, .n = 3, .k = 4}},
                      {"a:1", "b:2"}, t0);
  JobRecord warmup = Ok(t0 - milliseconds(100), 10, 0, 0);
  warmup.measured = false;
  summary.Add(warmup);
  summary.Add(Ok(t0, 10, 0, 0));
  summary.Add(Ok(t0 + milliseconds(500), 30, 1, 1));
  JobRecord failed = Ok(t0 + milliseconds(1200), 5, 0, 1);
  failed.code = absl::StatusCode::kUnavailable;
  summary.Add(failed);

  LoadReport report;
  report.mode = "kept";
  summary.FillReport(&report);
  EXPECT_EQ(report.mode, "kept");
  EXPECT_EQ(report.count, 3u);
  EXPECT_EQ(report.ok, 2u);
  EXPECT_EQ(report.errors, 1u);
  EXPECT_EQ(report.errors_by_code.at("UNAVAILABLE"), 1u);
  EXPECT_EQ(report.ok_by_target.at("a:1"), 1u);
  EXPECT_EQ(report.ok_by_target.at("b:2"), 1u);
  EXPECT_EQ(report.errors_by_target.at("a:1"), 0u);
  EXPECT_EQ(report.errors_by_target.at("b:2"), 1u);
  EXPECT_EQ(report.ok_by_device.at("cpu"), 2u);
  EXPECT_EQ(report.count_by_shape.at("10x10x10"), 2u);
  EXPECT_EQ(report.count_by_shape.at("2x3x4"), 1u);
  // From the end of the warm-up to the last measured end, 1.205 s.
  EXPECT_NEAR(report.duration_s, 1.205, 1e-9);
  EXPECT_NEAR(report.requests_per_s, 3 / 1.205, 1e-9);
  EXPECT_NEAR(report.gflops, (2000.0 + 48.0) / 1.205 / 1e9, 1e-15);
  EXPECT_NEAR(report.mb_per_s_out, 4.0 * (100 + 6) / 1.205 / 1e6, 1e-12);
  EXPECT_EQ(report.latency_ms.count, 2u);
  EXPECT_NEAR(report.latency_ms.min, 10, 1e-9);
  EXPECT_NEAR(report.latency_ms.max, 30, 1e-9);
  EXPECT_DOUBLE_EQ(report.compute_ms.mean, 2);
  EXPECT_DOUBLE_EQ(report.mean_batch_size, 2);
  // Seconds 0 and 1 of the measured part.
  ASSERT_EQ(report.timeline.size(), 2u);
  EXPECT_EQ(report.timeline[0].ok, 2u);
  EXPECT_EQ(report.timeline[1].errors, 1u);
  // Every OK latency lands in the histogram.
  uint64_t in_histogram = 0;
  for (uint64_t n : report.histogram_count) in_histogram += n;
  EXPECT_EQ(in_histogram, 2u);
  EXPECT_EQ(report.histogram_upper_ms.size(), report.histogram_count.size());
}

TEST(LoadSummaryTest, NothingMeasuredIsAllZero) {
  LoadSummary summary({{.m = 1, .n = 1, .k = 1}}, {"a:1"}, Clock::now());
  LoadReport report;
  summary.FillReport(&report);
  EXPECT_EQ(report.count, 0u);
  EXPECT_EQ(report.duration_s, 0);
  EXPECT_TRUE(report.timeline.empty());
  EXPECT_TRUE(report.histogram_count.empty());
  EXPECT_EQ(report.ok_by_target.at("a:1"), 0u);
}

}  // namespace
}  // namespace gemm::client
