// What `gemm-client load` does with a LoadReport once RunLoad() has made
// it: the JSON and CSV files where asked, and charts drawn from the JSON by
// client/plot_load.py (matplotlib).
//
// Thread-safety: stateless functions.
//
//   ASSIGN_OR_RETURN(LoadReport report, RunLoad(client.get(), options.load));
//   RETURN_IF_ERROR(WriteLoadReportFiles(options, report));
//   RETURN_IF_ERROR(PlotLoadReport(options, PlotScriptPath(argv[0])));
#ifndef GEMM_CLIENT_LOAD_COMMAND_H_
#define GEMM_CLIENT_LOAD_COMMAND_H_

#include <string>

#include "absl/status/status.h"
#include "client/load_generator.h"

namespace gemm::client {

struct LoadCommandOptions {
  LoadOptions load;
  // The full report as JSON; empty: none, unless plot_prefix is set (then
  // plot_prefix + ".json").
  std::string json_path;
  // The summary as CSV (header and one row); empty: none.
  std::string csv_path;
  // PREFIX-latency.png and PREFIX-throughput.png; empty: no charts.
  std::string plot_prefix;
};

// Where the JSON report goes (see LoadCommandOptions.json_path).
std::string JsonReportPath(const LoadCommandOptions& options);

// Writes the JSON and CSV reports where `options` asks for them.
absl::Status WriteLoadReportFiles(const LoadCommandOptions& options,
                                  const LoadReport& report);

// client/plot_load.py: in the runfiles of the program `argv0`, next to it,
// or where GEMM_CLIENT_PLOT_SCRIPT says.
std::string PlotScriptPath(const char* argv0);

// Draws the charts from the JSON report with `script`, under the Python
// that has Debian's matplotlib (GEMM_CLIENT_PYTHON, else /usr/bin/python3,
// else python3 on PATH). UNKNOWN "--plot failed: COMMAND" if it fails.
absl::Status PlotLoadReport(const LoadCommandOptions& options,
                            const std::string& script);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_LOAD_COMMAND_H_
