// Routes the log lines of the libraries the programs link (protobuf's
// GOOGLE_LOG and gRPC core's gpr_log) into spdlog, so that they obey the
// program's --log-level and format, and rate-limits them: a client can make
// a library log a line per request (protobuf once did, for every string
// field with invalid UTF-8), and a log must not grow faster than a hostile
// client can send.
//
// Each library gets a LogRateLimiter: up to `burst` lines at once and
// `lines_per_second` after that; the first line let through after some were
// dropped says how many. gRPC's assertion failures are never dropped (the
// process aborts right after them).
//
// Thread-safety: RouteLibraryLogs() once, early in main(); the handlers are
// thread-safe.
//
//   spdlog::set_level(level);
//   RouteLibraryLogs();
#ifndef GEMM_COMMON_LIBRARY_LOGS_H_
#define GEMM_COMMON_LIBRARY_LOGS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gemm {

// A token bucket of log lines.
class LogRateLimiter {
 public:
  struct Options {
    // Lines let through at once after a quiet spell. Default 20.
    double burst = 20;
    // Lines a second after that. Default 5.
    double lines_per_second = 5;
  };

  // `now` is the clock (tests pass their own). Default: absl::Now.
  explicit LogRateLimiter(const Options& options,
                          std::function<absl::Time()> now = absl::Now);

  // Whether a line may go out now; when it may, `dropped` gets the number
  // of lines refused since the last one let through.
  bool Admit(uint64_t* dropped);

 private:
  const Options options_;
  const std::function<absl::Time()> now_;
  absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ ABSL_GUARDED_BY(mu_);
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// Installs protobuf's and gRPC's log handlers (and sets gRPC's verbosity
// from spdlog's level, so that gRPC does not format lines spdlog would
// drop: gRPC's errors at spdlog's error, its info lines at debug, its debug
// lines at trace). Call after spdlog's level is set.
void RouteLibraryLogs(const LogRateLimiter::Options& options = {});

// A library line as RouteLibraryLogs() writes it: "[protobuf] text" with
// the count of dropped lines when there were any. For tests.
std::string LibraryLogLine(const char* library, const std::string& message,
                           uint64_t dropped);

}  // namespace gemm

#endif  // GEMM_COMMON_LIBRARY_LOGS_H_
