// UseJsonLogLines: makes spdlog write one JSON object per line,
// {"time": ..., "level": ..., "msg": ...}, for log collectors that parse
// lines (Loki, Elasticsearch, Cloud Logging). The message is escaped as a
// JSON string (quotes, backslashes, control characters, invalid UTF-8 as
// U+FFFD), so a client's text quoted in an error cannot break the line.
//
// Thread-safety: call once, early in main(), before other threads log.
//
//   if (log_format == "json") UseJsonLogLines();
#ifndef GEMM_COMMON_JSON_LOG_LINES_H_
#define GEMM_COMMON_JSON_LOG_LINES_H_

#include <string>

#include "absl/strings/string_view.h"
#include "spdlog/logger.h"

namespace gemm {

// For the default logger.
void UseJsonLogLines();
// For `logger` (tests).
void UseJsonLogLines(spdlog::logger& logger);

// `text` as the inside of a JSON string.
std::string JsonEscape(absl::string_view text);

}  // namespace gemm

#endif  // GEMM_COMMON_JSON_LOG_LINES_H_
