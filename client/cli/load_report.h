// What `gemm-client load` reports, and its formats: the LoadReport of a run
// (counts, errors by status code, throughput, latency percentiles, the
// server's time breakdown, per-second timeline, histogram) as text, JSON or
// CSV; the once-a-second progress line; and the nearest-rank statistics both
// are made of.
//
// Thread-safety: plain values and stateless functions.
//
//   ASSIGN_OR_RETURN(LoadReport report, RunLoad(client.get(), options));
//   std::cout << FormatReportText(report);
//   RETURN_IF_ERROR(WriteTextFile("run.json", FormatReportJson(report)));
#ifndef GEMM_CLIENT_CLI_LOAD_REPORT_H_
#define GEMM_CLIENT_CLI_LOAD_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gemm::client {

// Nearest-rank percentile `p` (0..100) of sorted values; 0 when empty.
double NearestRankPercentile(const std::vector<double>& sorted, double p);

// min, mean, percentiles (nearest rank) and max of a set of durations.
struct Distribution {
  uint64_t count = 0;
  double min = 0, mean = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0, p999 = 0,
         max = 0;
};
Distribution Summarize(std::vector<double> values);

struct LoadReport {
  // The run as configured.
  std::string mode;                  // "concurrency" or "rate"
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

  // The whole run, warm-up included: the jobs started, by the call they
  // went on ("stream": pipelined on the load's streams; "unary": a Gemm call
  // of their own; "own_stream": a GemmStream call of their own, for jobs
  // over the unary limit; "split": cut into row blocks), and the answers
  // that came back. Each job started gets exactly one answer, so a job
  // lost on the way shows as sent > answered_ok + answered_errors.
  uint64_t sent = 0;
  std::map<std::string, uint64_t> sent_by_call;
  uint64_t answered_ok = 0, answered_errors = 0;

  // The measured part.
  double duration_s = 0;  // first measured start to last measured end
  uint64_t count = 0;     // measured jobs that ended
  uint64_t ok = 0;
  uint64_t errors = 0;
  std::map<std::string, uint64_t> errors_by_code;   // e.g. "UNAVAILABLE"
  std::map<std::string, std::string> error_sample;  // code -> one message
  double requests_per_s = 0;
  double gflops = 0;        // 2*M*N*K of OK jobs per second
  double mb_per_s_in = 0;   // operand bytes sent to the server (OK jobs)
  double mb_per_s_out = 0;  // result bytes received (OK jobs)
  Distribution latency_ms;  // client end to end, OK jobs
  // Server-side breakdown of OK jobs (Timing), in ms.
  Distribution queue_ms, h2d_ms, compute_ms, d2h_ms, server_ms;
  // OK jobs whose result the server checked (Timing.check), the check's
  // time, and the failed runs it replaced.
  uint64_t checked = 0, check_mismatches = 0;
  Distribution check_ms;
  double mean_batch_size = 0;
  // Per server address: jobs that ended OK and failed there.
  std::map<std::string, uint64_t> ok_by_target, errors_by_target;
  // Per device that ran the job (Timing.device, e.g. "cuda:1 NVIDIA H200").
  std::map<std::string, uint64_t> ok_by_device;
  // Per shape ("MxNxK"): measured jobs, and the latency of its OK ones.
  std::map<std::string, uint64_t> count_by_shape;
  std::map<std::string, Distribution> latency_ms_by_shape;
  // Results checked against the float64 reference, warm-up included, and
  // of them wrong.
  uint64_t verified = 0, verify_failures = 0;
  uint64_t stream_restarts = 0;  // streams reopened after breaking

  // The server's own counts (Info's stats) over the whole run, warm-up
  // included, read before and after; only with a single server address.
  bool have_server_counts = false;
  // Jobs the server should have counted: one per job the client sent, or
  // GemmClient::Options.split_rows for a job it split.
  uint64_t server_side_jobs = 0;
  uint64_t server_jobs_ok = 0, server_jobs_failed = 0, server_jobs_rejected = 0;
  // Results the server checked (ABFT) and sent, and results that failed
  // their check (each re-run, or the job failed with DATA_LOSS).
  uint64_t server_jobs_checked = 0, server_check_mismatches = 0;

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

// Whether the server's counts match the client's: the server counted as
// many jobs as the client sent (server_side_jobs), and, unless jobs were
// split (which the server counts in parts), as many OK as came back OK.
// False without the server's counts.
bool ServerCountsAgree(const LoadReport& report);

std::string FormatReportText(const LoadReport& report);
// The whole report; field names are what bench/ scripts and tests read.
std::string FormatReportJson(const LoadReport& report);
// A header line and one row: the summary figures, for comparing runs.
std::string FormatReportCsv(const LoadReport& report);

// What one second of the run looked like (the progress line).
struct LoadProgress {
  double elapsed_s = 0;  // since the start, warm-up included
  bool warming_up = false;
  uint64_t sent = 0;       // jobs submitted so far, warm-up included
  uint64_t completed = 0;  // jobs ended so far, warm-up included
  uint64_t errors = 0;     // of them, failed
  uint64_t in_flight = 0;
  double last_second_rps = 0;
  double last_second_p50_ms = 0;
  double last_second_p99_ms = 0;
};

// The progress line; for a terminal it redraws itself in place ("\r" ...
// erase to the end of the line), otherwise it is a line of its own.
std::string FormatProgressLine(const LoadProgress& progress, bool terminal);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_LOAD_REPORT_H_
