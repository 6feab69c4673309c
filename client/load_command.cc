#include "client/load_command.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "client/load_report.h"
#include "client/text_file.h"

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

std::string PlotScriptPath(const char* argv0) {
  if (const char* env = std::getenv("GEMM_CLIENT_PLOT_SCRIPT")) return env;
  const std::string self = argv0;
  for (const std::string& candidate :
       {self + ".runfiles/gemm_service/client/plot_load.py",
        self.substr(0, self.rfind('/') + 1) + "plot_load.py",
        std::string("client/plot_load.py")}) {
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return "client/plot_load.py";
}

absl::Status PlotLoadReport(const LoadCommandOptions& options,
                            const std::string& script) {
  // Debian's matplotlib lives with /usr/bin/python3, which may not be the
  // first python3 on PATH.
  const char* python = std::getenv("GEMM_CLIENT_PYTHON");
  if (python == nullptr) {
    python =
        access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  }
  const std::string command =
      absl::StrCat(python, " '", script, "' '", JsonReportPath(options), "' '",
                   options.plot_prefix, "'");
  if (std::system(command.c_str()) != 0) {
    return absl::UnknownError(absl::StrCat("--plot failed: ", command));
  }
  return absl::OkStatus();
}

}  // namespace gemm::client
