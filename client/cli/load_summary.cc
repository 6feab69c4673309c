#include "client/cli/load_summary.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace gemm::client {
namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

double Millis(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// 40 buckets, evenly spaced on a log scale from the fastest job to the
// slowest.
void FillHistogram(const std::vector<double>& latency, LoadReport* report) {
  if (latency.empty()) return;
  constexpr int kBuckets = 40;
  const double lo = std::max(report->latency_ms.min, 1e-3);
  const double hi = std::max(report->latency_ms.max, lo * 1.0001);
  const double step = std::log(hi / lo) / kBuckets;
  report->histogram_count.assign(kBuckets, 0);
  for (int i = 0; i < kBuckets; ++i) {
    report->histogram_upper_ms.push_back(lo * std::exp(step * (i + 1)));
  }
  for (double ms : latency) {
    int i = static_cast<int>(std::log(std::max(ms, lo) / lo) / step);
    ++report->histogram_count[std::clamp(i, 0, kBuckets - 1)];
  }
}

}  // namespace

LoadSummary::LoadSummary(std::vector<GemmProblem> problems,
                         std::vector<std::string> targets,
                         Clock::time_point measure_start)
    : problems_(std::move(problems)),
      targets_(std::move(targets)),
      measure_start_(measure_start),
      last_end_(measure_start) {
  for (const std::string& target : targets_) {
    figures_.ok_by_target[target] = 0;
    figures_.errors_by_target[target] = 0;
  }
}

void LoadSummary::Add(const JobRecord& r) {
  if (!r.measured) return;
  ++figures_.count;
  last_end_ = std::max(last_end_, r.end);
  const GemmProblem& problem = problems_[r.shape];
  ++figures_.count_by_shape[problem.ToString()];
  const size_t second =
      static_cast<size_t>(std::max(0.0, Seconds(r.end - measure_start_)));
  if (buckets_.size() <= second) buckets_.resize(second + 1);
  Bucket& bucket = buckets_[second];
  if (r.code != absl::StatusCode::kOk) {
    ++figures_.errors;
    ++figures_.errors_by_code[absl::StatusCodeToString(r.code)];
    ++figures_.errors_by_target[targets_[r.target]];
    ++bucket.errors;
    return;
  }
  ++figures_.ok;
  ++figures_.ok_by_target[targets_[r.target]];
  ++figures_.ok_by_device[r.timing.device()];
  const double ms = Millis(r.end - r.start);
  latency_.push_back(ms);
  latency_by_shape_[problem.ToString()].push_back(ms);
  bucket.latency.push_back(ms);
  ++bucket.ok;
  bucket.flop += problem.flops();
  flop_ += problem.flops();
  bytes_in_ += 4.0 * (problem.a_elements() + problem.b_elements());
  bytes_out_ += 4.0 * problem.c_elements();
  queue_.push_back(r.timing.queue_ms());
  h2d_.push_back(r.timing.h2d_ms());
  compute_.push_back(r.timing.compute_ms());
  d2h_.push_back(r.timing.d2h_ms());
  server_.push_back(r.timing.server_ms());
  if (r.timing.check().ran()) {
    check_.push_back(r.timing.check().ms());
    check_mismatches_ += r.timing.check().mismatches();
  }
  batch_sum_ += r.timing.batch_size();
}

void LoadSummary::FillReport(LoadReport* report) {
  report->count = figures_.count;
  report->ok = figures_.ok;
  report->errors = figures_.errors;
  report->errors_by_code = figures_.errors_by_code;
  report->ok_by_target = figures_.ok_by_target;
  report->errors_by_target = figures_.errors_by_target;
  report->ok_by_device = figures_.ok_by_device;
  report->count_by_shape = figures_.count_by_shape;
  report->duration_s = Seconds(last_end_ - measure_start_);
  if (report->duration_s > 0) {
    report->requests_per_s = report->count / report->duration_s;
    report->gflops = flop_ / report->duration_s / 1e9;
    report->mb_per_s_in = bytes_in_ / report->duration_s / 1e6;
    report->mb_per_s_out = bytes_out_ / report->duration_s / 1e6;
  }
  if (report->ok > 0) report->mean_batch_size = batch_sum_ / report->ok;
  report->timeline.clear();
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    std::sort(b.latency.begin(), b.latency.end());
    LoadReport::Second second;
    second.t_s = static_cast<double>(i);
    second.ok = b.ok;
    second.errors = b.errors;
    second.p50_ms = NearestRankPercentile(b.latency, 50);
    second.p99_ms = NearestRankPercentile(b.latency, 99);
    second.gflops = b.flop / 1e9;
    report->timeline.push_back(second);
  }
  report->latency_ms = Summarize(latency_);
  report->latency_ms_by_shape.clear();
  for (const auto& [shape, latency] : latency_by_shape_) {
    report->latency_ms_by_shape[shape] = Summarize(latency);
  }
  report->histogram_upper_ms.clear();
  report->histogram_count.clear();
  FillHistogram(latency_, report);
  report->queue_ms = Summarize(queue_);
  report->h2d_ms = Summarize(h2d_);
  report->compute_ms = Summarize(compute_);
  report->d2h_ms = Summarize(d2h_);
  report->server_ms = Summarize(server_);
  report->checked = check_.size();
  report->check_mismatches = check_mismatches_;
  report->check_ms = Summarize(check_);
}

}  // namespace gemm::client
