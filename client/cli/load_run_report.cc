// LoadRun's progress lines and its report (load_run.h).
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/load_report.h"
#include "client/cli/load_run.h"
#include "client/cli/load_run_parts.h"
#include "client/cli/load_summary.h"

namespace gemm::client {
namespace {

using Clock = LoadRun::Clock;

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

void LoadRun::ReportProgress(Clock::time_point start,
                             Clock::time_point warmup_end) {
  LoadProgress progress;
  const Clock::time_point now = Clock::now();
  progress.elapsed_s = Seconds(now - start);
  progress.warming_up = now < warmup_end;
  progress.sent = sent_.load(std::memory_order_relaxed);
  std::vector<double> last;
  for (const auto& d : dispatchers_) {
    std::vector<double> mine;
    {
      absl::MutexLock lock(&d->mu);
      progress.completed += d->completed;
      progress.errors += d->errors;
      progress.in_flight += d->in_flight;
      mine.swap(d->last_second_ms);
    }
    last.insert(last.end(), mine.begin(), mine.end());
  }
  std::sort(last.begin(), last.end());
  progress.last_second_rps = last.size();
  progress.last_second_p50_ms = NearestRankPercentile(last, 50);
  progress.last_second_p99_ms = NearestRankPercentile(last, 99);
  options_.on_progress(progress);
}

LoadReport LoadRun::ReportOf(Clock::time_point measure_start) const {
  LoadReport report;
  report.mode = options_.rate > 0 ? "rate" : "concurrency";
  report.targets = client_->channel_targets();
  report.connections = static_cast<int>(client_->channel_targets().size());
  report.streams = static_cast<int>(streams_.size());
  report.concurrency = options_.concurrency;
  report.rate = options_.rate;
  report.arrivals = options_.rate == 0 ? "closed-loop"
                    : options_.poisson ? "poisson"
                                       : "constant";
  std::vector<std::string> shape_names;
  for (const ShapeData& data : shapes_) {
    shape_names.push_back(
        absl::StrCat(data.operands.problem().ToString(), ":", data.weight));
  }
  report.shapes = absl::StrJoin(shape_names, ",");
  report.kernel = options_.kernel;
  report.warmup_s = absl::ToDoubleSeconds(options_.warmup);
  report.warmup_jobs = warmup_jobs_.load();
  report.server_side_jobs = server_side_jobs_.load();
  report.sent = sent_.load();
  uint64_t sent_by_call[kCalls] = {};
  std::vector<GemmProblem> problems;
  for (const ShapeData& data : shapes_) {
    problems.push_back(data.operands.problem());
  }
  LoadSummary summary(std::move(problems), targets_, measure_start);
  std::map<absl::StatusCode, std::string> error_sample;
  for (const auto& d : dispatchers_) {
    absl::MutexLock lock(&d->mu);
    report.stream_restarts += d->stream_restarts;
    for (int call = 0; call < kCalls; ++call) {
      sent_by_call[call] += d->sent_by_call[call];
    }
    report.answered_ok += d->completed - d->errors;
    report.answered_errors += d->errors;
    report.verified += d->verified;
    report.verify_failures += d->verify_failures;
    // The first dispatcher's sample of a code wins.
    error_sample.insert(d->error_sample.begin(), d->error_sample.end());
    for (const JobRecord& record : d->records) summary.Add(record);
  }
  report.sent_by_call = {{"stream", sent_by_call[kStream]},
                         {"unary", sent_by_call[kUnary]},
                         {"own_stream", sent_by_call[kOwnStream]},
                         {"split", sent_by_call[kSplit]}};
  for (const auto& [code, message] : error_sample) {
    report.error_sample[absl::StatusCodeToString(code)] = message;
  }
  summary.FillReport(&report);
  return report;
}

}  // namespace gemm::client
