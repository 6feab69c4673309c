// LoadGenerator: the network load test behind `gemm-client load`, in the
// manner of perf_analyzer and ghz.
//
// It pipelines jobs over one JobStream per channel of a GemmClient, either
// closed loop (a fixed number of jobs outstanding: "concurrency mode") or
// open loop (jobs start at a fixed rate, with constant or Poisson gaps:
// "request-rate mode"), for a duration or a count, after a warm-up that is
// left out of every figure. Operands are random matrices generated once per
// shape; a job that is checked sends a scaled copy of them of its own
// (client/cli/shape_operands.h). Every job's latency, status and server-side
// timing is recorded and summarised (LoadSummary) in a LoadReport
// (client/cli/load_report.h formats it as text, JSON or CSV).
//
// With unary_share > 0, some jobs go each on a call of their own
// (GemmClient::GemmAsync) instead of on the streams; the report counts jobs
// by the call they went on (LoadReport.sent_by_call). Per-target counts put
// such jobs, and split ones, under the target of the stream their
// dispatcher would have used, which is exact with one server.
//
// Jobs are started by one dispatcher thread per stream (at most one per job
// of the concurrency cap; a dispatcher then rotates over several streams).
// Each owns its streams (and reopens them when they break), an RNG seeded
// from `seed`, an even share of `concurrency` and of `rate`, and the records
// of its jobs, so that neither starting nor ending a job takes a lock shared
// by all of them. The counts (sent, warm-up jobs, `count`) stay exact. A cap
// split this way is per dispatcher: one dispatcher at its share waits even
// when another has room.
//
// Thread-safety: RunLoad() runs the dispatchers and returns once all have
// ended; progress callbacks run on a thread of the generator.
//
//   LoadOptions options;
//   options.shapes = *ParseShapeMix("128x128x128:0.7,1024x1024x1024:0.3");
//   ASSIGN_OR_RETURN(LoadReport report, RunLoad(client.get(), options));
//   std::cout << FormatReportText(report);
#ifndef GEMM_CLIENT_CLI_LOAD_GENERATOR_H_
#define GEMM_CLIENT_CLI_LOAD_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/cli/load_report.h"
#include "client/cli/shape_mix.h"
#include "client/lib/gemm_client.h"
#include "client/lib/job_region.h"

namespace gemm::client {

struct LoadOptions {
  // The jobs' shapes; required.
  std::vector<WeightedShape> shapes;
  // Kernel of every job: "auto" or a name from Info.
  std::string kernel = "auto";
  // The result check asked of every job (GemmParams.check).
  v1::Check check = v1::CHECK_DEFAULT;
  // The arithmetic asked of the server (GemmParams.precision).
  v1::Precision precision = v1::PRECISION_DEFAULT;
  // Where operands and results travel (job_region.h). In a region, each
  // shape's A and B (and C) are written there once, and each job's result
  // lands in a slot of its own, which is read back only for a verified job
  // (whose operands, its own, then travel in the messages). Jobs beyond
  // the region's result slots (one per job --concurrency allows, or 256)
  // take their result back over the socket.
  OperandMemory memory = OperandMemory::kMessages;
  // Jobs outstanding at once. In concurrency mode (rate == 0) it is the
  // number of closed-loop workers and must be at least 1; in rate mode 0
  // means no cap. Default 16.
  int concurrency = 16;
  // Jobs started per second; 0 (the default) selects concurrency mode.
  double rate = 0;
  // In rate mode, exponential (Poisson) gaps between starts instead of
  // constant ones.
  bool poisson = false;
  // Length of the measured part; used when count is 0. Default 10 s.
  absl::Duration duration = absl::Seconds(10);
  // Jobs in the measured part; 0 means "run for `duration`".
  uint64_t count = 0;
  // Time at the start whose jobs are left out of every figure. Default 1 s.
  absl::Duration warmup = absl::Seconds(1);
  // GemmStream calls opened on each connection (channel); jobs are spread
  // over all of them. More than one lets several jobs move at once on one
  // TCP connection (HTTP/2 multiplexing). Default 1.
  int streams_per_connection = 1;
  // Share of the jobs (0..1), drawn per job, sent each on a call of its own
  // through GemmClient::GemmAsync, as `gemm-client run` sends them: a unary
  // Gemm call, or a GemmStream call of its own (in chunks) for a job over
  // the unary limit. The rest are pipelined on the load's streams. Default
  // 0: every job on the streams.
  double unary_share = 0;
  // Server-side budget of each job (GemmArgs.timeout_ms); 0 = none.
  uint32_t job_timeout_ms = 0;
  // Check every Nth job's C against a float64 reference; 0 = never. Each
  // checked job has operands of its own, so that a result delivered to the
  // wrong job fails (client/cli/shape_operands.h), and its output buffer is
  // filled with NaN first, so that a result that never lands fails.
  uint64_t verify_every = 0;
  // Seed of the operands and of the shape and arrival draws.
  uint64_t seed = 42;
  // Called about once per second with the run's state; may be empty.
  std::function<void(const LoadProgress&)> on_progress;
};

// Runs the load test over one JobStream per channel of `client`.
absl::StatusOr<LoadReport> RunLoad(GemmClient* client,
                                   const LoadOptions& options);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_LOAD_GENERATOR_H_
