// JudgeLoad: whether a `gemm-client load` run passed, for its exit status,
// so that a script (or CI) can trust it: a load test against a closed port
// answers every job UNAVAILABLE, and figures computed from nothing must not
// read as a pass.
//
// A run fails when a result was wrong against the float64 reference (exit
// 2), or (exit 4) when no measured job succeeded, when a job sent never
// got its answer, when any job failed (unless errors are allowed), or when
// the server's counts disagree with the client's (unless errors are
// allowed and the run had some: a job refused before it reached the server
// is counted by the client only).
//
// Thread-safety: a stateless function.
//
//   LoadVerdict verdict = JudgeLoad(report, /*allow_errors=*/false);
//   for (const std::string& why : verdict.failures) std::cerr << why << "\n";
//   return verdict.exit_code;
#ifndef GEMM_CLIENT_CLI_LOAD_VERDICT_H_
#define GEMM_CLIENT_CLI_LOAD_VERDICT_H_

#include <string>
#include <vector>

#include "client/cli/load_report.h"

namespace gemm::client {

struct LoadVerdict {
  // 0: passed; 2: a wrong result; 4: failed jobs, lost jobs, no success or
  // counts that disagree.
  int exit_code = 0;
  // Why it failed, a sentence each; empty when it passed.
  std::vector<std::string> failures;
};

// Exit statuses of `gemm-client load`.
constexpr int kLoadWrongResults = 2;
constexpr int kLoadFailedJobs = 4;

LoadVerdict JudgeLoad(const LoadReport& report, bool allow_errors);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_LOAD_VERDICT_H_
