#include "tests/metrics_scrape.h"

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

}  // namespace gemm::testing
