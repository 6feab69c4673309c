// Writes a text file (a report) in one go, as a status.
//
// Thread-safety: a stateless function.
//
//   RETURN_IF_ERROR(WriteTextFile("run.json", FormatReportJson(report)));
//   RETURN_IF_ERROR(WriteTextFile("run.csv", FormatReportCsv(report)));
//   // UNAVAILABLE "cannot write PATH" when the file cannot be written
#ifndef GEMM_CLIENT_CLI_TEXT_FILE_H_
#define GEMM_CLIENT_CLI_TEXT_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace gemm::client {

absl::Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_TEXT_FILE_H_
