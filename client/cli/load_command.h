// What `gemm-client load` does with a LoadReport once RunLoad() has made
// it: the JSON and CSV files where asked, and SVG charts (load_charts.h).
//
// Thread-safety: stateless functions.
//
//   ASSIGN_OR_RETURN(LoadReport report, RunLoad(client.get(), options.load));
//   RETURN_IF_ERROR(WriteLoadReportFiles(options, report));
//   RETURN_IF_ERROR(PlotLoadReport(options, report));
#ifndef GEMM_CLIENT_CLI_LOAD_COMMAND_H_
#define GEMM_CLIENT_CLI_LOAD_COMMAND_H_

#include <string>

#include "absl/status/status.h"
#include "client/cli/load_generator.h"

namespace gemm::client {

struct LoadCommandOptions {
  LoadOptions load;
  // The full report as JSON; empty: none, unless plot_prefix is set (then
  // plot_prefix + ".json").
  std::string json_path;
  // The summary as CSV (header and one row); empty: none.
  std::string csv_path;
  // PREFIX-latency.svg and PREFIX-throughput.svg; empty: no charts.
  std::string plot_prefix;
};

// Where the JSON report goes (see LoadCommandOptions.json_path).
std::string JsonReportPath(const LoadCommandOptions& options);

// Writes the JSON and CSV reports where `options` asks for them.
absl::Status WriteLoadReportFiles(const LoadCommandOptions& options,
                                  const LoadReport& report);

// Writes PREFIX-latency.svg and PREFIX-throughput.svg where
// options.plot_prefix asks for them (load_charts.h).
absl::Status PlotLoadReport(const LoadCommandOptions& options,
                            const LoadReport& report);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_LOAD_COMMAND_H_
