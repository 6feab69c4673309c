// LoadSummary turns the records of a load run's jobs into the measured
// figures of its LoadReport: counts and errors (by status code, target and
// shape), throughput, latency percentiles and histogram, the server's time
// breakdown and the per-second timeline. Jobs started in the warm-up
// (JobRecord.measured false) are left out.
//
// Thread-safety: none; one thread adds the records and fills the report.
//
//   LoadSummary summary(problems, targets, warmup_end);
//   for (const JobRecord& record : records) summary.Add(record);
//   summary.FillReport(&report);
#ifndef GEMM_CLIENT_CLI_LOAD_SUMMARY_H_
#define GEMM_CLIENT_CLI_LOAD_SUMMARY_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/cli/load_report.h"
#include "common/gemm_problem.h"
#include "proto/gemm.pb.h"

namespace gemm::client {

// One ended job of a load run.
struct JobRecord {
  // Its (scheduled) start and its end.
  std::chrono::steady_clock::time_point start, end;
  int shape = 0;   // index into LoadSummary's problems
  int target = 0;  // index into LoadSummary's targets
  absl::StatusCode code = absl::StatusCode::kOk;
  bool measured = false;  // started after the warm-up
  v1::Timing timing;      // when OK
};

class LoadSummary {
 public:
  // `problems` and `targets` are what JobRecord's indices refer to;
  // `measure_start` is the end of the warm-up.
  LoadSummary(std::vector<GemmProblem> problems,
              std::vector<std::string> targets,
              std::chrono::steady_clock::time_point measure_start);

  void Add(const JobRecord& record);

  // Sets the measured figures of `report` (count, ok, errors, errors_by_code,
  // throughput, duration, latency, histogram, server breakdown, batch size,
  // per target, device and shape, timeline); leaves the rest alone.
  void FillReport(LoadReport* report);

 private:
  using Clock = std::chrono::steady_clock;

  // The jobs that ended in one second of the measured part.
  struct Bucket {
    uint64_t ok = 0, errors = 0;
    double flop = 0;
    std::vector<double> latency;
  };

  const std::vector<GemmProblem> problems_;
  const std::vector<std::string> targets_;
  const Clock::time_point measure_start_;

  LoadReport figures_;  // the counts, filled as records come
  Clock::time_point last_end_;
  std::vector<double> latency_, queue_, h2d_, compute_, d2h_, server_;
  std::vector<double> check_;
  std::map<std::string, std::vector<double>> latency_by_shape_;
  uint64_t check_mismatches_ = 0;
  double flop_ = 0, bytes_in_ = 0, bytes_out_ = 0, batch_sum_ = 0;
  std::vector<Bucket> buckets_;
};

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_LOAD_SUMMARY_H_
