#include "server/observability/metrics.h"

#include <cmath>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gemm::server {
namespace {

// Whether `text` holds `line` as a whole line.
bool HasLine(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST(MetricsRegistryTest, CountersRenderWithTheirLabelsInLabelOrder) {
  MetricsRegistry registry;
  CounterFamily& jobs =
      registry.AddCounter("demo_jobs_total", "Jobs.", {"outcome", "code"});
  jobs.With({"ok", "OK"}).Increment(3);
  jobs.With({"failed", "INTERNAL"}).Increment();
  EXPECT_EQ(registry.Render(),
            "# HELP demo_jobs_total Jobs.\n"
            "# TYPE demo_jobs_total counter\n"
            "demo_jobs_total{outcome=\"failed\",code=\"INTERNAL\"} 1\n"
            "demo_jobs_total{outcome=\"ok\",code=\"OK\"} 3\n");
}

TEST(MetricsRegistryTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  MetricsRegistry registry;
  HistogramFamily& h =
      registry.AddHistogram("demo_seconds", "Time.", {}, {0.25, 0.5, 2});
  Histogram& cell = h.With({});
  cell.Observe(0.125);  // le 0.25
  cell.Observe(0.25);   // le 0.25: bounds are inclusive
  cell.Observe(0.375);  // le 0.5
  cell.Observe(7);      // only +Inf
  EXPECT_EQ(registry.Render(),
            "# HELP demo_seconds Time.\n"
            "# TYPE demo_seconds histogram\n"
            "demo_seconds_bucket{le=\"0.25\"} 2\n"
            "demo_seconds_bucket{le=\"0.5\"} 3\n"
            "demo_seconds_bucket{le=\"2\"} 3\n"
            "demo_seconds_bucket{le=\"+Inf\"} 4\n"
            "demo_seconds_sum 7.75\n"
            "demo_seconds_count 4\n");
}

TEST(MetricsRegistryTest, LabelValuesAndHelpAreEscaped) {
  MetricsRegistry registry;
  registry.AddGauge("demo_info", "A \\ help\nline.", {"name"}, [] {
    return std::vector<Sample>{{{"say \"hi\"\\\n"}, 1}};
  });
  EXPECT_EQ(registry.Render(),
            "# HELP demo_info A \\\\ help\\nline.\n"
            "# TYPE demo_info gauge\n"
            "demo_info{name=\"say \\\"hi\\\"\\\\\\n\"} 1\n");
}

TEST(MetricsRegistryTest, SampledFamiliesAreReadAtEachRender) {
  MetricsRegistry registry;
  double value = 1;
  registry.AddSampledCounter("demo_reads_total", "Reads.", {}, [&] {
    return std::vector<Sample>{{{}, value}};
  });
  EXPECT_TRUE(HasLine(registry.Render(), "demo_reads_total 1"));
  value = 12345678901;
  EXPECT_TRUE(HasLine(registry.Render(), "demo_reads_total 12345678901"));
}

TEST(MetricsRegistryTest, ValuesAreFormattedAsPrometheusReadsThem) {
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(2.5e-05), "2.5e-05");
  EXPECT_EQ(FormatMetricValue(1e21), "1e+21");
  EXPECT_EQ(FormatMetricValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatMetricValue(-INFINITY), "-Inf");
  EXPECT_EQ(FormatMetricValue(NAN), "NaN");
}

TEST(MetricsRegistryTest, ConcurrentCountsAreAllKept) {
  MetricsRegistry registry;
  CounterFamily& c = registry.AddCounter("demo_total", "N.", {"worker"});
  HistogramFamily& h = registry.AddHistogram("demo_size", "S.", {}, {1, 10});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) {
        c.With({t % 2 == 0 ? "even" : "odd"}).Increment();
        h.With({}).Observe(i % 20);
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::string text = registry.Render();
  EXPECT_TRUE(HasLine(text, "demo_total{worker=\"even\"} 20000"));
  EXPECT_TRUE(HasLine(text, "demo_total{worker=\"odd\"} 20000"));
  EXPECT_TRUE(HasLine(text, "demo_size_count 40000"));
  // 0..1 of each 20 values are <= 1, 0..10 are <= 10.
  EXPECT_TRUE(HasLine(text, "demo_size_bucket{le=\"1\"} 4000"));
  EXPECT_TRUE(HasLine(text, "demo_size_bucket{le=\"10\"} 22000"));
  // Sum of 0..19, 2000 times.
  EXPECT_TRUE(HasLine(text, "demo_size_sum 380000"));
}

}  // namespace
}  // namespace gemm::server
