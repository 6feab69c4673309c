// Reading a gemm-server's /metrics in tests: one scrape over HTTP, the
// value of one series in the text, and an endpoint on a free port that a
// test can wait on (common/wait_until.h).
//
// Thread-safety: stateless functions; a MetricsEndpoint is immutable.
//
//   std::string text = ScrapeMetrics(port);
//   EXPECT_EQ(MetricSample(text, "gemm_queued_jobs "), 0);
#ifndef GEMM_TESTS_METRICS_SCRAPE_H_
#define GEMM_TESTS_METRICS_SCRAPE_H_

#include <string>
#include <vector>

namespace gemm::testing {

// GET http://127.0.0.1:`port`/metrics: the body, or "" when the scrape
// fails or is not a 200 in the text format.
std::string ScrapeMetrics(int port);

// The value of the first sample whose line starts with `series` (its name
// and labels, or a prefix of them); -1 when there is none.
double MetricSample(const std::string& text, const std::string& series);

// /metrics of a server under test on a free loopback port: Flags() go to
// its ServerProcess, Scrape() reads the text once it has started.
//
//   MetricsEndpoint metrics("drain");
//   ServerProcess server(metrics.Flags());
//   ...
//   WaitUntil([&] { return metrics.Sample("gemm_queued_jobs ") == 6; }, ...);
class MetricsEndpoint {
 public:
  // `name` names the port file, fresh in the test's temporary folder.
  explicit MetricsEndpoint(const std::string& name);
  // --metrics-listen 127.0.0.1:0 --metrics-port-file FILE.
  std::vector<std::string> Flags() const;
  // The port the server wrote; 0 before it has.
  int port() const;
  // One scrape (ScrapeMetrics); "" when there is no port yet or it fails.
  std::string Scrape() const;
  // MetricSample of one scrape; -1 when there is none.
  double Sample(const std::string& series) const;

 private:
  std::string port_file_;
};

}  // namespace gemm::testing

#endif  // GEMM_TESTS_METRICS_SCRAPE_H_
