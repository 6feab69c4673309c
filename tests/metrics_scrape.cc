#include "tests/metrics_scrape.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "httplib.h"

namespace gemm::testing {

std::string ScrapeMetrics(int port) {
  httplib::Client http("127.0.0.1", port);
  auto response = http.Get("/metrics");
  if (!response || response->status != 200 ||
      response->get_header_value("Content-Type") !=
          "text/plain; version=0.0.4; charset=utf-8") {
    return "";
  }
  return response->body;
}

double MetricSample(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, series)) continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    if (absl::SimpleAtod(line.substr(space + 1), &value)) return value;
  }
  return -1;
}

MetricsEndpoint::MetricsEndpoint(const std::string& name) {
  const char* folder = std::getenv("TEST_TMPDIR");
  port_file_ = std::string(folder != nullptr ? folder : "/tmp") + "/" + name +
               "-metrics.port";
  std::remove(port_file_.c_str());
}

std::vector<std::string> MetricsEndpoint::Flags() const {
  return {"--metrics-listen", "127.0.0.1:0", "--metrics-port-file", port_file_};
}

int MetricsEndpoint::port() const {
  int port = 0;
  std::ifstream(port_file_) >> port;
  return port;
}

std::string MetricsEndpoint::Scrape() const {
  const int p = port();
  return p > 0 ? ScrapeMetrics(p) : "";
}

double MetricsEndpoint::Sample(const std::string& series) const {
  return MetricSample(Scrape(), series);
}

}  // namespace gemm::testing
