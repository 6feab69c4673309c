#include "server/observability/job_event_log.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace gemm::server {

std::string JobEventLog::Line(absl::string_view what, absl::string_view client,
                              absl::string_view job, const GemmProblem* problem,
                              const absl::Status& status) {
  return absl::StrCat(
      what, ": ", job, " of client ", client,
      problem != nullptr ? absl::StrCat(" (", problem->ToString(), ")") : "",
      ": ", absl::StatusCodeToString(status.code()), ": ", status.message());
}

void JobEventLog::Refused(absl::string_view client, absl::string_view job,
                          const GemmProblem* problem,
                          const absl::Status& status) {
  Log("job refused", client, job, problem, status);
}

void JobEventLog::Failed(absl::string_view client, absl::string_view job,
                         const GemmProblem* problem,
                         const absl::Status& status) {
  Log("job failed", client, job, problem, status);
}

void JobEventLog::Log(absl::string_view what, absl::string_view client,
                      absl::string_view job, const GemmProblem* problem,
                      const absl::Status& status) {
  if (!spdlog::should_log(spdlog::level::warn)) return;
  uint64_t dropped = 0;
  if (!limiter_.Admit(&dropped)) return;
  const std::string line = Line(what, client, job, problem, status);
  if (dropped > 0) {
    spdlog::warn("{} ({} similar lines dropped)", line, dropped);
  } else {
    spdlog::warn("{}", line);
  }
}

}  // namespace gemm::server
