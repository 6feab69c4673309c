// `gemm-client load`: its flags, and the run they ask for, a single load
// or a sweep over concurrency or rate (as perf_analyzer's
// --concurrency-range) that prints one line per step; the exit status says
// whether the run passed (load_verdict.h).
//
// Thread-safety: RunLoadCommand runs the load on the calling thread (and
// the client's); the rest are stateless.
//
//   LoadFlags flags;
//   CLI::Option* concurrency = AddLoadFlags(app.add_subcommand("load"),
//   &flags); CLI11_PARSE(app, argc, argv); return RunLoadCommand(client.get(),
//   flags, concurrency->count() > 0);
#ifndef GEMM_CLIENT_CLI_LOAD_CLI_H_
#define GEMM_CLIENT_CLI_LOAD_CLI_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/lib/gemm_client.h"
#include "proto/gemm.pb.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace gemm::client {

struct LoadFlags {
  std::string shapes = "128x128x128";
  std::string kernel = "auto";
  v1::Check check = v1::CHECK_DEFAULT;
  v1::Precision precision = v1::PRECISION_DEFAULT;
  std::string memory = "socket";
  int concurrency = 16;
  double rate = 0;
  std::string arrivals = "constant";
  double duration_s = 10;
  uint64_t count = 0;
  double warmup_s = 1;
  int streams_per_connection = 1;
  double unary_share = 0;
  uint32_t job_timeout_ms = 0;
  uint64_t verify_every = 0;
  uint64_t seed = 42;
  std::string json_path, csv_path, plot_prefix;
  bool quiet = false;
  bool allow_errors = false;
  // START:END[:STEP] sweeps; empty: one run.
  std::string concurrency_range, rate_range;
};

// Registers load's flags on `load`; returns --concurrency's option (whether
// it was given changes what it means in rate mode).
CLI::Option* AddLoadFlags(CLI::App* load, LoadFlags* flags);

// The steps of "START:END[:STEP]" (STEP default 1 for a concurrency and
// START for a rate): START, START+STEP, ... up to END, END always last.
// INVALID_ARGUMENT naming `flag` when it does not parse, is not positive,
// goes down or has over 100 steps.
absl::StatusOr<std::vector<double>> ParseSweepRange(absl::string_view flag,
                                                    absl::string_view range,
                                                    bool integers);

// Runs the load `flags` ask for on `client`, prints the report (text on
// stdout; files where asked) or, for a sweep, a line per step; returns
// the exit status: 0 passed, 1 the run could not be made, 2 a wrong result,
// 4 failed jobs (load_verdict.h), each failure said on stderr.
int RunLoadCommand(GemmClient* client, const LoadFlags& flags, bool rate_cap);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_LOAD_CLI_H_
