#include "common/library_logs.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "grpc/support/log.h"
#include "spdlog/spdlog.h"

namespace gemm {

LogRateLimiter::LogRateLimiter(const Options& options,
                               std::function<absl::Time()> now)
    : options_(options),
      now_(std::move(now)),
      tokens_(options.burst),
      last_(now_()) {}

bool LogRateLimiter::Admit(uint64_t* dropped) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  tokens_ = std::min(
      options_.burst,
      tokens_ + options_.lines_per_second * absl::ToDoubleSeconds(now - last_));
  last_ = now;
  if (tokens_ < 1) {
    ++dropped_;
    return false;
  }
  tokens_ -= 1;
  *dropped = dropped_;
  dropped_ = 0;
  return true;
}

std::string LibraryLogLine(const char* library, const std::string& message,
                           uint64_t dropped) {
  std::string line = absl::StrCat("[", library, "] ", message);
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) {
    line.pop_back();
  }
  if (dropped > 0) {
    absl::StrAppend(&line, " (", dropped,
                    " earlier line(s) of this library dropped by the rate "
                    "limit)");
  }
  return line;
}

namespace {

// Leaked on purpose: libraries may log until the process exits.
LogRateLimiter* protobuf_limiter = nullptr;
LogRateLimiter* grpc_limiter = nullptr;

void Emit(spdlog::level::level_enum level, LogRateLimiter* limiter,
          const char* library, const std::string& message, bool always) {
  if (!spdlog::should_log(level)) return;
  uint64_t dropped = 0;
  if (!limiter->Admit(&dropped) && !always) return;
  spdlog::log(level, "{}", LibraryLogLine(library, message, dropped));
}

void ProtobufHandler(google::protobuf::LogLevel level, const char* /*file*/,
                     int /*line*/, const std::string& message) {
  spdlog::level::level_enum spd = spdlog::level::err;
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      spd = spdlog::level::info;
      break;
    case google::protobuf::LOGLEVEL_WARNING:
      spd = spdlog::level::warn;
      break;
    case google::protobuf::LOGLEVEL_ERROR:
      spd = spdlog::level::err;
      break;
    case google::protobuf::LOGLEVEL_FATAL:
      spd = spdlog::level::critical;
      break;
  }
  Emit(spd, protobuf_limiter, "protobuf", message,
       level == google::protobuf::LOGLEVEL_FATAL);
}

void GrpcHandler(gpr_log_func_args* args) {
  // gRPC's INFO lines are start-up chatter: the server's debug level.
  spdlog::level::level_enum spd = spdlog::level::err;
  if (args->severity == GPR_LOG_SEVERITY_DEBUG) spd = spdlog::level::trace;
  if (args->severity == GPR_LOG_SEVERITY_INFO) spd = spdlog::level::debug;
  const std::string message = args->message != nullptr ? args->message : "";
  Emit(spd, grpc_limiter, "grpc", message,
       absl::StartsWith(message, "assertion failed"));
}

}  // namespace

void RouteLibraryLogs(const LogRateLimiter::Options& options) {
  if (protobuf_limiter == nullptr) {
    protobuf_limiter = new LogRateLimiter(options);
    grpc_limiter = new LogRateLimiter(options);
  }
  google::protobuf::SetLogHandler(&ProtobufHandler);
  gpr_set_log_function(&GrpcHandler);
  const spdlog::level::level_enum level = spdlog::get_level();
  gpr_set_log_verbosity(level <= spdlog::level::trace ? GPR_LOG_SEVERITY_DEBUG
                        : level <= spdlog::level::debug
                            ? GPR_LOG_SEVERITY_INFO
                            : GPR_LOG_SEVERITY_ERROR);
}

}  // namespace gemm
