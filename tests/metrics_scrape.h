// Reading a gemm-server's /metrics in tests: one scrape over HTTP, and the
// value of one series in the text.
//
//   std::string text = ScrapeMetrics(port);
//   EXPECT_EQ(MetricSample(text, "gemm_queued_jobs "), 0);
#ifndef GEMM_TESTS_METRICS_SCRAPE_H_
#define GEMM_TESTS_METRICS_SCRAPE_H_

#include <string>

namespace gemm::testing {

// GET http://127.0.0.1:`port`/metrics: the body, or "" when the scrape
// fails or is not a 200 in the text format.
std::string ScrapeMetrics(int port);

// The value of the first sample whose line starts with `series` (its name
// and labels, or a prefix of them); -1 when there is none.
double MetricSample(const std::string& text, const std::string& series);

}  // namespace gemm::testing

#endif  // GEMM_TESTS_METRICS_SCRAPE_H_
