#include "client/cli/load_command.h"

#include "absl/strings/str_cat.h"
#include "client/cli/load_charts.h"
#include "client/cli/load_report.h"
#include "client/cli/text_file.h"

namespace gemm::client {

std::string JsonReportPath(const LoadCommandOptions& options) {
  if (!options.json_path.empty() || options.plot_prefix.empty()) {
    return options.json_path;
  }
  return options.plot_prefix + ".json";
}

absl::Status WriteLoadReportFiles(const LoadCommandOptions& options,
                                  const LoadReport& report) {
  const std::string json_path = JsonReportPath(options);
  if (!json_path.empty()) {
    absl::Status s = WriteTextFile(json_path, FormatReportJson(report));
    if (!s.ok()) return s;
  }
  if (!options.csv_path.empty()) {
    return WriteTextFile(options.csv_path, FormatReportCsv(report));
  }
  return absl::OkStatus();
}

absl::Status PlotLoadReport(const LoadCommandOptions& options,
                            const LoadReport& report) {
  if (options.plot_prefix.empty()) return absl::OkStatus();
  absl::Status s = WriteTextFile(options.plot_prefix + "-latency.svg",
                                 LatencyChartSvg(report));
  if (!s.ok()) return s;
  return WriteTextFile(options.plot_prefix + "-throughput.svg",
                       ThroughputChartSvg(report));
}

}  // namespace gemm::client
