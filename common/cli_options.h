// Flags of the programs bound straight to the options they set, so that an
// option's default lives in one place (its Options struct) and --help shows
// it: a duration given in seconds, milliseconds or microseconds.
//
// Thread-safety: call while building the command line, on one thread.
//
//   absl::Duration idle = absl::Minutes(10);
//   AddSecondsOption(app, "--idle-timeout-s", &idle, "(0: never)");
#ifndef GEMM_COMMON_CLI_OPTIONS_H_
#define GEMM_COMMON_CLI_OPTIONS_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace gemm {

// --name COUNT sets *duration to COUNT units; the default shown is
// *duration's, in those units.
inline CLI::Option* AddDurationOption(CLI::App& app, const std::string& name,
                                      absl::Duration* duration,
                                      absl::Duration unit,
                                      const std::string& help) {
  return app
      .add_option_function<double>(
          name,
          [duration, unit](const double& count) { *duration = count * unit; },
          help)
      ->check(CLI::NonNegativeNumber)
      ->default_str(absl::StrCat(absl::FDivDuration(*duration, unit)));
}

inline CLI::Option* AddSecondsOption(CLI::App& app, const std::string& name,
                                     absl::Duration* duration,
                                     const std::string& help) {
  return AddDurationOption(app, name, duration, absl::Seconds(1), help);
}

inline CLI::Option* AddMillisecondsOption(CLI::App& app,
                                          const std::string& name,
                                          absl::Duration* duration,
                                          const std::string& help) {
  return AddDurationOption(app, name, duration, absl::Milliseconds(1), help);
}

inline CLI::Option* AddMicrosecondsOption(CLI::App& app,
                                          const std::string& name,
                                          absl::Duration* duration,
                                          const std::string& help) {
  return AddDurationOption(app, name, duration, absl::Microseconds(1), help);
}

}  // namespace gemm

#endif  // GEMM_COMMON_CLI_OPTIONS_H_
