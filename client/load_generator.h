// LoadGenerator: the network load test behind `gemm-client load`, in the
// manner of perf_analyzer and ghz.
//
// It pipelines jobs over one JobStream per channel of a GemmClient, either
// closed loop (a fixed number of jobs outstanding: "concurrency mode") or
// open loop (jobs start at a fixed rate, with constant or Poisson gaps:
// "request-rate mode"), for a duration or a count, after a warm-up that is
// left out of every figure. Operands are random matrices generated once per
// shape. Every job's latency, status and server-side timing is recorded and
// summarised in a LoadReport (text, JSON or CSV).
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
#ifndef GEMM_CLIENT_LOAD_GENERATOR_H_
#define GEMM_CLIENT_LOAD_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/gemm_client.h"

namespace gemm::client {

// One shape of a mix and its share of the jobs.
struct WeightedShape {
  GemmProblem problem;
  double weight = 1.0;
};

// Parses "MxNxK[:weight],..." such as "128x128x128:0.7,1024x1024x1024:0.3".
// A missing weight is 1; weights need not add up to 1.
absl::StatusOr<std::vector<WeightedShape>> ParseShapeMix(absl::string_view mix);

// What one second of the run looked like (the progress line).
struct LoadProgress {
  double elapsed_s = 0;    // since the start, warm-up included
  bool warming_up = false;
  uint64_t sent = 0;       // jobs submitted so far, warm-up included
  uint64_t completed = 0;  // jobs ended so far, warm-up included
  uint64_t errors = 0;     // of them, failed
  uint64_t in_flight = 0;
  double last_second_rps = 0;
  double last_second_p50_ms = 0;
  double last_second_p99_ms = 0;
};

struct LoadOptions {
  // The jobs' shapes; required.
  std::vector<WeightedShape> shapes;
  // Kernel of every job: "auto" or a name from Info.
  std::string kernel = "auto";
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
  // Server-side budget of each job (GemmArgs.timeout_ms); 0 = none.
  uint32_t job_timeout_ms = 0;
  // Check every Nth job's C against a float64 reference; 0 = never.
  uint64_t verify_every = 0;
  // Seed of the operands and of the shape and arrival draws.
  uint64_t seed = 42;
  // Called about once per second with the run's state; may be empty.
  std::function<void(const LoadProgress&)> on_progress;
};

// min, mean, percentiles (nearest rank) and max of a set of durations.
struct Distribution {
  uint64_t count = 0;
  double min = 0, mean = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0, p999 = 0,
         max = 0;
};
Distribution Summarize(std::vector<double> values);

struct LoadReport {
  // The run as configured.
  std::string mode;  // "concurrency" or "rate"
  std::vector<std::string> targets;  // one per channel
  int connections = 0;               // channels (TCP connections)
  int streams = 0;                   // GemmStream calls over all of them
  int concurrency = 0;
  double rate = 0;
  std::string arrivals;  // "closed-loop", "constant" or "poisson"
  std::string shapes;
  std::string kernel;
  double warmup_s = 0;
  uint64_t warmup_jobs = 0;  // jobs started in the warm-up (not counted)

  // The measured part.
  double duration_s = 0;  // first measured start to last measured end
  uint64_t count = 0;     // measured jobs that ended
  uint64_t ok = 0;
  uint64_t errors = 0;
  std::map<std::string, uint64_t> errors_by_code;   // e.g. "UNAVAILABLE"
  std::map<std::string, std::string> error_sample;  // code -> one message
  double requests_per_s = 0;
  double gflops = 0;           // 2*M*N*K of OK jobs per second
  double mb_per_s_in = 0;      // operand bytes sent to the server (OK jobs)
  double mb_per_s_out = 0;     // result bytes received (OK jobs)
  Distribution latency_ms;     // client end to end, OK jobs
  // Server-side breakdown of OK jobs (Timing), in ms.
  Distribution queue_ms, h2d_ms, compute_ms, d2h_ms, server_ms;
  double mean_batch_size = 0;
  // Per server address: jobs that ended OK and failed there.
  std::map<std::string, uint64_t> ok_by_target, errors_by_target;
  // Per device that ran the job (Timing.device, e.g. "cuda:1 NVIDIA H200").
  std::map<std::string, uint64_t> ok_by_device;
  // Per shape ("MxNxK"): measured jobs.
  std::map<std::string, uint64_t> count_by_shape;
  uint64_t verified = 0, verify_failures = 0;
  uint64_t stream_restarts = 0;  // streams reopened after breaking

  // The server's own counts (Info's stats) over the whole run, warm-up
  // included, read before and after; only with a single server address.
  bool have_server_counts = false;
  // Jobs the server should have counted: one per job the client sent, or
  // GemmClient::Options.split_rows for a job it split.
  uint64_t server_side_jobs = 0;
  uint64_t server_jobs_ok = 0, server_jobs_failed = 0,
           server_jobs_rejected = 0;

  // Per second of the measured part.
  struct Second {
    double t_s = 0;
    uint64_t ok = 0, errors = 0;
    double p50_ms = 0, p99_ms = 0;
    double gflops = 0;
  };
  std::vector<Second> timeline;
  // Latency histogram of OK jobs: bucket upper edges (ms) and counts.
  std::vector<double> histogram_upper_ms;
  std::vector<uint64_t> histogram_count;
};

// Runs the load test over one JobStream per channel of `client`.
absl::StatusOr<LoadReport> RunLoad(GemmClient* client,
                                   const LoadOptions& options);

std::string FormatReportText(const LoadReport& report);
std::string FormatReportJson(const LoadReport& report);
// A header line and one row: the summary figures, for comparing runs.
std::string FormatReportCsv(const LoadReport& report);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_LOAD_GENERATOR_H_
