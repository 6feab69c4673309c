// What `gemm-client run` does: one GEMM, on operands read from .npy files
// (which then set M, N and K) or made at random, sent `repeat` times with
// each run's client and server timings printed, optionally checked against a
// float64 reference, and C optionally written to a .npy file.
//
// Thread-safety: stateless functions; `out` is written from the calling
// thread only.
//
//   ASSIGN_OR_RETURN(RunOperands operands, PrepareOperands(options));
//   ASSIGN_OR_RETURN(int failures, RunGemms(client.get(), options, operands,
//                                           "host:50051", stdout));
#ifndef GEMM_CLIENT_CLI_RUN_COMMAND_H_
#define GEMM_CLIENT_CLI_RUN_COMMAND_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/lib/gemm_client.h"
#include "client/lib/job_region.h"
#include "common/gemm_problem.h"

namespace gemm::client {

struct RunOptions {
  // The shape, transposes, alpha and beta; .npy operands override the sizes.
  // Default 1024^3.
  GemmProblem problem{.m = 1024, .n = 1024, .k = 1024};
  // "auto" or a kernel from Info.
  std::string kernel = "auto";
  // .npy files of A (sets M and K), B (sets K and N) and C (with beta); empty:
  // random operands.
  std::string a_path, b_path, c_path;
  // Where to write C as .npy; empty: nowhere.
  std::string out_path;
  // Check each result against a float64 reference (rel. error <= 1e-5).
  bool verify = false;
  // Times to run the job. Default 1.
  int repeat = 1;
  // Seed of the random operands (A: seed, B: seed + 1, C: seed + 2).
  uint64_t seed = 42;
  // Server-side budget of the job; 0 = none.
  uint32_t job_timeout_ms = 0;
  // The result check asked of the server (GemmParams.check).
  v1::Check check = v1::CHECK_DEFAULT;
  // The arithmetic asked of the server (GemmParams.precision).
  v1::Precision precision = v1::PRECISION_DEFAULT;
  // Where A, B, C and the result travel: in the messages, or in a region
  // shared with a server on this host (job_region.h); the result is then
  // read from the region after each run, outside the timed call.
  OperandMemory memory = OperandMemory::kMessages;
};

// The job's problem, with sizes from the files, and its operands.
struct RunOperands {
  GemmProblem problem;
  std::vector<float> a, b, c;  // c empty unless beta != 0 or --c
};

// Reads the .npy operands and makes the rest at random. INVALID_ARGUMENT
// when the files' sizes disagree.
absl::StatusOr<RunOperands> PrepareOperands(const RunOptions& options);

// Runs the job options.repeat times, printing a header and a line per run
// (timings, and the error against float64 with options.verify) to `out`,
// then writes C to options.out_path. Returns the number of results that
// failed the check; a failed call ends the runs with its error.
absl::StatusOr<int> RunGemms(GemmClient* client, const RunOptions& options,
                             const RunOperands& operands,
                             const std::string& server, std::FILE* out);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_RUN_COMMAND_H_
