// JobEventLog: one log line for each job turned away or failed, so that an
// operator sees who is refused and why: the client (its identity,
// call_auth.h), the job (the unary call, or the stream's job id), its shape
// when known, and the status code and message. Never matrix data. The
// lines are rate-limited (LogRateLimiter: 20 at once, then 5 a second; the
// next line let through says how many were dropped), since a client can
// have any number of jobs refused.
//
// Thread-safety: thread-safe.
//
//   events.Refused(client, "unary call", &spec.problem, status);
//   events.Failed(client, "stream job 7", &job.problem(), status);
#ifndef GEMM_SERVER_OBSERVABILITY_JOB_EVENT_LOG_H_
#define GEMM_SERVER_OBSERVABILITY_JOB_EVENT_LOG_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/gemm_problem.h"
#include "common/library_logs.h"

namespace gemm::server {

class JobEventLog {
 public:
  JobEventLog() : limiter_(LogRateLimiter::Options()) {}

  // A job not accepted (its status says why). `problem` may be null.
  void Refused(absl::string_view client, absl::string_view job,
               const GemmProblem* problem, const absl::Status& status);
  // An accepted job that ended without its result.
  void Failed(absl::string_view client, absl::string_view job,
              const GemmProblem* problem, const absl::Status& status);

  // The line either would log (for tests).
  static std::string Line(absl::string_view what, absl::string_view client,
                          absl::string_view job, const GemmProblem* problem,
                          const absl::Status& status);

 private:
  void Log(absl::string_view what, absl::string_view client,
           absl::string_view job, const GemmProblem* problem,
           const absl::Status& status);

  LogRateLimiter limiter_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_OBSERVABILITY_JOB_EVENT_LOG_H_
