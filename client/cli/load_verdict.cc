#include "client/cli/load_verdict.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gemm::client {
namespace {

// "UNAVAILABLE 16 (e.g. "failed to connect"), RESOURCE_EXHAUSTED 2 (...)".
std::string ErrorsByCode(const LoadReport& r) {
  std::vector<std::string> parts;
  for (const auto& [code, count] : r.errors_by_code) {
    auto sample = r.error_sample.find(code);
    parts.push_back(
        absl::StrCat(code, " ", count,
                     sample == r.error_sample.end() || sample->second.empty()
                         ? ""
                         : absl::StrCat(" (e.g. \"", sample->second, "\")")));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace

LoadVerdict JudgeLoad(const LoadReport& r, bool allow_errors) {
  LoadVerdict verdict;
  auto fail = [&verdict](int code, std::string why) {
    if (verdict.exit_code == 0) verdict.exit_code = code;
    verdict.failures.push_back(std::move(why));
  };
  if (r.verify_failures > 0) {
    fail(kLoadWrongResults,
         absl::StrCat(r.verify_failures, " of ", r.verified,
                      " results checked against the float64 reference were "
                      "wrong"));
  }
  if (r.ok == 0) {
    fail(kLoadFailedJobs,
         r.count == 0
             ? std::string("no job ended in the measured part of the run")
             : absl::StrCat("no job succeeded: ", r.count,
                            " failed: ", ErrorsByCode(r)));
  } else if (r.answered_errors > 0 && !allow_errors) {
    fail(kLoadFailedJobs,
         absl::StrCat(r.answered_errors, " of ",
                      r.answered_ok + r.answered_errors,
                      " jobs failed (warm-up included): ", ErrorsByCode(r),
                      "; --allow-errors to pass anyway"));
  }
  const uint64_t answered = r.answered_ok + r.answered_errors;
  if (answered < r.sent) {
    fail(kLoadFailedJobs, absl::StrCat(r.sent - answered, " of ", r.sent,
                                       " jobs sent never got an answer"));
  }
  const bool errors_explain = allow_errors && r.answered_errors > 0;
  if (r.have_server_counts && !ServerCountsAgree(r) && !errors_explain) {
    fail(kLoadFailedJobs,
         absl::StrCat("the server's counts disagree with the client's: it "
                      "counted ",
                      r.server_jobs_ok, " ok, ", r.server_jobs_failed,
                      " failed and ", r.server_jobs_rejected,
                      " rejected for the client's ", r.server_side_jobs,
                      " jobs, ", r.answered_ok, " ok"));
  }
  return verdict;
}

}  // namespace gemm::client
