#include "client/load_generator.h"


#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/reference_gemm.h"

namespace gemm::client {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}
double Millis(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

std::string ShapeName(const WeightedShape& s) {
  return s.problem.ToString();
}

// Nearest-rank percentile of sorted values.
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  // The epsilon keeps 99.9% of 1000 at rank 999 despite rounding.
  size_t rank =
      static_cast<size_t>(std::ceil(p / 100.0 * sorted.size() - 1e-9));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

// Operands of one shape, made once; its float64 answer when verifying.
struct ShapeData {
  WeightedShape shape;
  std::vector<float> a, b;
  std::vector<double> want;
};

// One ended job.
struct Record {
  Clock::time_point start, end;
  int shape = 0;
  int target = 0;
  absl::StatusCode code = absl::StatusCode::kOk;
  bool measured = false;
  v1::Timing timing;
};

// One dispatcher thread and what it owns: every n-th stream, its RNG, its
// share of the concurrency cap and of the rate, and the records of its jobs.
// Completions of its jobs take only its lock, so dispatchers do not contend
// with each other.
struct Dispatcher {
  // Whether another job may start under this dispatcher's cap.
  bool BelowCap() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return cap == 0 || in_flight < cap;
  }

  int index = 0;
  std::vector<int> slots;  // indices into LoadRun::streams_
  uint64_t next_slot = 0;
  uint64_t cap = 0;  // jobs outstanding at once; 0 = no cap
  double rate = 0;   // jobs started per second; 0 = closed loop
  std::mt19937_64 random;
  std::discrete_distribution<int> pick_shape;
  // Streams that broke and were replaced; finished at the end, since a
  // stream cannot be destroyed from its own callbacks.
  std::vector<std::unique_ptr<JobStream>> broken_streams;
  uint64_t stream_restarts = 0;
  std::thread thread;

  mutable absl::Mutex mu;
  std::vector<std::unique_ptr<float[]>> free_buffers ABSL_GUARDED_BY(mu);
  std::vector<Record> records ABSL_GUARDED_BY(mu);
  uint64_t in_flight ABSL_GUARDED_BY(mu) = 0;
  uint64_t completed ABSL_GUARDED_BY(mu) = 0;
  uint64_t errors ABSL_GUARDED_BY(mu) = 0;
  uint64_t verified ABSL_GUARDED_BY(mu) = 0;
  uint64_t verify_failures ABSL_GUARDED_BY(mu) = 0;
  std::vector<double> last_second_ms ABSL_GUARDED_BY(mu);
  std::map<absl::StatusCode, std::string> error_sample ABSL_GUARDED_BY(mu);
};

class LoadRun {
 public:
  LoadRun(GemmClient* client, const LoadOptions& options)
      : client_(client), options_(options) {}

  absl::StatusOr<LoadReport> Run();

 private:
  void Prepare();
  int TargetIndex(const std::string& target) const;
  void DispatchLoop(Dispatcher* d, Clock::time_point warmup_end,
                    Clock::time_point stop_at);
  void Dispatch(Dispatcher* d, Clock::time_point scheduled, bool measured);
  void OnEnd(Dispatcher* d, int shape, int target, float* out, uint64_t seq,
             Clock::time_point start, bool measured,
             absl::StatusOr<v1::Timing> result);
  void ReportProgress(Clock::time_point start, Clock::time_point warmup_end);
  LoadReport Summarize(Clock::time_point measure_start) const;

  GemmClient* const client_;
  const LoadOptions options_;
  std::vector<ShapeData> shapes_;
  std::vector<double> shape_weights_;
  std::vector<std::string> targets_;  // distinct addresses
  size_t out_floats_ = 0;

  // Streams, one per channel; slot i is touched only by the dispatcher that
  // owns it (i % dispatchers_.size()).
  std::vector<std::unique_ptr<JobStream>> streams_;
  std::vector<int> stream_target_;
  std::vector<std::unique_ptr<Dispatcher>> dispatchers_;

  // Shared by the dispatchers; exact because each is one atomic step.
  std::atomic<uint64_t> sent_{0};              // jobs started, warm-up included
  std::atomic<uint64_t> warmup_jobs_{0};       // of them, in the warm-up
  std::atomic<uint64_t> measured_claimed_{0};  // --count: measured starts
  std::atomic<uint64_t> server_side_jobs_{0};  // split jobs count their parts
};

void LoadRun::Prepare() {
  uint64_t seed = options_.seed;
  for (const WeightedShape& shape : options_.shapes) {
    ShapeData data;
    data.shape = shape;
    const GemmProblem& problem = shape.problem;
    data.a.resize(problem.a_elements());
    data.b.resize(problem.b_elements());
    FillRandom(data.a.data(), data.a.size(), seed++);
    FillRandom(data.b.data(), data.b.size(), seed++);
    if (options_.verify_every > 0) {
      data.want =
          ReferenceGemm(problem, data.a.data(), data.b.data(), nullptr);
    }
    out_floats_ = std::max<size_t>(out_floats_, problem.c_elements());
    shape_weights_.push_back(shape.weight);
    shapes_.push_back(std::move(data));
  }
  for (const std::string& target : client_->channel_targets()) {
    if (std::find(targets_.begin(), targets_.end(), target) == targets_.end()) {
      targets_.push_back(target);
    }
  }
  // OpenStream() rotates over the channels, so stream i is on channel
  // i % channels.
  const size_t channels = client_->channel_targets().size() *
                          std::max(options_.streams_per_connection, 1);
  for (size_t i = 0; i < channels; ++i) {
    streams_.push_back(client_->OpenStream());
    stream_target_.push_back(TargetIndex(streams_.back()->target()));
  }

  // One dispatcher per stream, but never more than the cap allows jobs (a
  // dispatcher with a cap share of 0 could send nothing); a dispatcher then
  // owns several streams and rotates over them.
  const uint64_t cap = options_.concurrency > 0 ? options_.concurrency : 0;
  const size_t count =
      cap > 0 ? std::min<size_t>(channels, cap) : std::max<size_t>(channels, 1);
  for (size_t i = 0; i < count; ++i) {
    auto d = std::make_unique<Dispatcher>();
    d->index = static_cast<int>(i);
    for (size_t slot = i; slot < channels; slot += count) {
      d->slots.push_back(static_cast<int>(slot));
    }
    // Split evenly; the first cap % count dispatchers take one more.
    if (cap > 0) d->cap = cap / count + (i < cap % count ? 1 : 0);
    d->rate = options_.rate / count;
    // Dispatcher 0 draws exactly what the single dispatcher used to.
    d->random.seed(options_.seed + i * 0x9E3779B97F4A7C15ull);
    d->pick_shape = std::discrete_distribution<int>(shape_weights_.begin(),
                                                    shape_weights_.end());
    {
      absl::MutexLock lock(&d->mu);
      d->records.reserve(4096);
    }
    dispatchers_.push_back(std::move(d));
  }
}

int LoadRun::TargetIndex(const std::string& target) const {
  return static_cast<int>(std::find(targets_.begin(), targets_.end(), target) -
                          targets_.begin());
}

void LoadRun::DispatchLoop(Dispatcher* d, Clock::time_point warmup_end,
                           Clock::time_point stop_at) {
  const bool by_count = options_.count > 0;
  const Clock::time_point start =
      warmup_end - absl::ToChronoNanoseconds(options_.warmup);
  std::exponential_distribution<double> poisson_gap(d->rate > 0 ? d->rate
                                                                : 1.0);
  // Dispatchers start out of phase: with constant gaps, dispatcher i of n
  // starts i/rate late so that together they start a job every 1/rate;
  // with Poisson gaps each draws its first gap (the sum of independent
  // Poisson processes is one of the summed rate).
  Clock::time_point next_arrival = start;
  if (options_.rate > 0 && d->index > 0) {
    const double offset_s =
        options_.poisson ? poisson_gap(d->random) : d->index / options_.rate;
    next_arrival += std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(offset_s));
  }
  const absl::Condition below_cap(d, &Dispatcher::BelowCap);
  while (true) {
    // Wait for a free worker (closed loop) or room under the cap.
    {
      absl::MutexLock lock(&d->mu);
      while (!d->BelowCap()) {
        d->mu.AwaitWithTimeout(below_cap, absl::Milliseconds(50));
        if (!by_count && Clock::now() >= stop_at) break;
      }
    }
    Clock::time_point scheduled;
    if (options_.rate > 0) {
      scheduled = next_arrival;
      const double gap_s =
          options_.poisson ? poisson_gap(d->random) : 1.0 / d->rate;
      next_arrival += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(gap_s));
    } else {
      scheduled = Clock::now();
    }
    const bool measured = scheduled >= warmup_end;
    if (by_count) {
      // Claimed before sleeping, so that exactly `count` measured jobs start
      // over all dispatchers.
      if (measured && measured_claimed_.fetch_add(1) >= options_.count) break;
    } else if (scheduled >= stop_at) {
      break;
    }
    if (options_.rate > 0) std::this_thread::sleep_until(scheduled);
    Dispatch(d, scheduled, measured);
  }
  for (int slot : d->slots) streams_[slot]->Finish().IgnoreError();
  for (auto& stream : d->broken_streams) stream->Finish().IgnoreError();
}

void LoadRun::Dispatch(Dispatcher* d, Clock::time_point scheduled,
                       bool measured) {
  const int shape = d->pick_shape(d->random);
  const int slot = d->slots[d->next_slot++ % d->slots.size()];
  if (streams_[slot]->done()) {
    // The stream broke (e.g. the server went away): reopen it; the old one
    // is kept until the end, since it cannot be destroyed from its own
    // callbacks.
    d->broken_streams.push_back(std::move(streams_[slot]));
    streams_[slot] = client_->OpenStream();
    stream_target_[slot] = TargetIndex(streams_[slot]->target());
    ++d->stream_restarts;
  }
  float* out;
  {
    absl::MutexLock lock(&d->mu);
    if (d->free_buffers.empty()) {
      d->free_buffers.push_back(std::make_unique<float[]>(out_floats_));
    }
    out = d->free_buffers.back().release();
    d->free_buffers.pop_back();
    ++d->in_flight;
  }
  const ShapeData& data = shapes_[shape];
  GemmArgs args;
  args.problem = data.shape.problem;
  args.kernel = options_.kernel;
  args.timeout_ms = options_.job_timeout_ms;
  args.a = data.a.data();
  args.b = data.b.data();
  const uint64_t seq = sent_.fetch_add(1, std::memory_order_relaxed);
  if (!measured) warmup_jobs_.fetch_add(1, std::memory_order_relaxed);
  const int target = stream_target_[slot];
  GemmCallback done = [this, d, shape, target, out, seq, scheduled,
                       measured](absl::StatusOr<v1::Timing> result) {
    OnEnd(d, shape, target, out, seq, scheduled, measured, std::move(result));
  };
  if (client_->WouldSplit(args)) {
    // Its parts go out on several channels at once, not on this stream.
    server_side_jobs_.fetch_add(client_->options().split_rows,
                                std::memory_order_relaxed);
    client_->GemmAsync(args, out, std::move(done));
  } else {
    server_side_jobs_.fetch_add(1, std::memory_order_relaxed);
    streams_[slot]->Submit(args, out, std::move(done));
  }
}

void LoadRun::OnEnd(Dispatcher* d, int shape, int target, float* out,
                    uint64_t seq, Clock::time_point start, bool measured,
                    absl::StatusOr<v1::Timing> result) {
  Record record;
  record.end = Clock::now();
  record.start = start;
  record.shape = shape;
  record.target = target;
  record.measured = measured;
  record.code = result.status().code();
  bool checked = false, good = true;
  if (result.ok()) {
    record.timing = std::move(*result);
    if (options_.verify_every > 0 && seq % options_.verify_every == 0) {
      checked = true;
      good = RelativeFrobeniusError(out, shapes_[shape].want) <= 1e-5;
    }
  }
  absl::MutexLock lock(&d->mu);
  if (!result.ok() && d->error_sample.count(record.code) == 0) {
    d->error_sample[record.code] = std::string(result.status().message());
  }
  d->free_buffers.emplace_back(out);
  --d->in_flight;
  ++d->completed;
  if (!result.ok()) ++d->errors;
  if (checked) {
    ++d->verified;
    if (!good) ++d->verify_failures;
  }
  if (result.ok() && options_.on_progress) {
    d->last_second_ms.push_back(Millis(record.end - start));
  }
  d->records.push_back(std::move(record));
}

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
  progress.last_second_p50_ms = Percentile(last, 50);
  progress.last_second_p99_ms = Percentile(last, 99);
  options_.on_progress(progress);
}

absl::StatusOr<LoadReport> LoadRun::Run() {
  Prepare();
  const Clock::time_point start = Clock::now();
  const Clock::time_point warmup_end =
      start + absl::ToChronoNanoseconds(options_.warmup);
  const Clock::time_point stop_at =
      warmup_end + absl::ToChronoNanoseconds(options_.duration);

  std::atomic<bool> running{true};
  std::thread progress_thread;
  if (options_.on_progress) {
    progress_thread = std::thread([&] {
      Clock::time_point next = start + std::chrono::seconds(1);
      while (running.load()) {
        std::this_thread::sleep_until(
            std::min(next, Clock::now() + std::chrono::milliseconds(50)));
        if (Clock::now() < next) continue;
        next += std::chrono::seconds(1);
        ReportProgress(start, warmup_end);
      }
    });
  }
  for (auto& d : dispatchers_) {
    Dispatcher* dispatcher = d.get();
    d->thread = std::thread([this, dispatcher, warmup_end, stop_at] {
      DispatchLoop(dispatcher, warmup_end, stop_at);
    });
  }
  for (auto& d : dispatchers_) d->thread.join();
  running.store(false);
  if (progress_thread.joinable()) progress_thread.join();
  return Summarize(warmup_end);
}

LoadReport LoadRun::Summarize(Clock::time_point measure_start) const {
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
        absl::StrCat(ShapeName(data.shape), ":", data.shape.weight));
  }
  report.shapes = absl::StrJoin(shape_names, ",");
  report.kernel = options_.kernel;
  report.warmup_s = absl::ToDoubleSeconds(options_.warmup);
  report.warmup_jobs = warmup_jobs_.load();
  report.server_side_jobs = server_side_jobs_.load();
  for (const std::string& target : targets_) {
    report.ok_by_target[target] = 0;
    report.errors_by_target[target] = 0;
  }

  Clock::time_point last_end = measure_start;
  std::vector<double> latency, queue, h2d, compute, d2h, server;
  double flop = 0, bytes_in = 0, bytes_out = 0, batch_sum = 0;
  struct Bucket {
    uint64_t ok = 0, errors = 0;
    double flop = 0;
    std::vector<double> latency;
  };
  std::vector<Bucket> buckets;
  std::map<absl::StatusCode, std::string> error_sample;
  for (const auto& d : dispatchers_) {
    absl::MutexLock lock(&d->mu);
    report.stream_restarts += d->stream_restarts;
    report.verified += d->verified;
    report.verify_failures += d->verify_failures;
    // The first dispatcher's sample of a code wins.
    error_sample.insert(d->error_sample.begin(), d->error_sample.end());
    for (const Record& r : d->records) {
      if (!r.measured) continue;
      ++report.count;
      last_end = std::max(last_end, r.end);
      const WeightedShape& shape = shapes_[r.shape].shape;
      ++report.count_by_shape[ShapeName(shape)];
      const size_t second = static_cast<size_t>(
          std::max(0.0, Seconds(r.end - measure_start)));
      if (buckets.size() <= second) buckets.resize(second + 1);
      Bucket& bucket = buckets[second];
      if (r.code != absl::StatusCode::kOk) {
        ++report.errors;
        ++report.errors_by_code[absl::StatusCodeToString(r.code)];
        ++report.errors_by_target[targets_[r.target]];
        ++bucket.errors;
        continue;
      }
      ++report.ok;
      ++report.ok_by_target[targets_[r.target]];
      ++report.ok_by_device[r.timing.device()];
      const double ms = Millis(r.end - r.start);
      const GemmProblem& problem = shape.problem;
      const double job_flop = problem.flops();
      latency.push_back(ms);
      bucket.latency.push_back(ms);
      ++bucket.ok;
      bucket.flop += job_flop;
      flop += job_flop;
      bytes_in += 4.0 * (problem.a_elements() + problem.b_elements());
      bytes_out += 4.0 * problem.c_elements();
      queue.push_back(r.timing.queue_ms());
      h2d.push_back(r.timing.h2d_ms());
      compute.push_back(r.timing.compute_ms());
      d2h.push_back(r.timing.d2h_ms());
      server.push_back(r.timing.server_ms());
      batch_sum += r.timing.batch_size();
    }
  }
  for (const auto& [code, message] : error_sample) {
    report.error_sample[absl::StatusCodeToString(code)] = message;
  }
  report.duration_s = Seconds(last_end - measure_start);
  if (report.duration_s > 0) {
    report.requests_per_s = report.count / report.duration_s;
    report.gflops = flop / report.duration_s / 1e9;
    report.mb_per_s_in = bytes_in / report.duration_s / 1e6;
    report.mb_per_s_out = bytes_out / report.duration_s / 1e6;
  }
  if (report.ok > 0) report.mean_batch_size = batch_sum / report.ok;
  for (size_t i = 0; i < buckets.size(); ++i) {
    Bucket& b = buckets[i];
    std::sort(b.latency.begin(), b.latency.end());
    LoadReport::Second second;
    second.t_s = static_cast<double>(i);
    second.ok = b.ok;
    second.errors = b.errors;
    second.p50_ms = Percentile(b.latency, 50);
    second.p99_ms = Percentile(b.latency, 99);
    second.gflops = b.flop / 1e9;
    report.timeline.push_back(second);
  }
  report.latency_ms = gemm::client::Summarize(latency);
  if (!latency.empty()) {
    // 40 buckets, evenly spaced on a log scale from min to max.
    constexpr int kBuckets = 40;
    const double lo = std::max(report.latency_ms.min, 1e-3);
    const double hi = std::max(report.latency_ms.max, lo * 1.0001);
    const double step = std::log(hi / lo) / kBuckets;
    report.histogram_count.assign(kBuckets, 0);
    for (int i = 0; i < kBuckets; ++i) {
      report.histogram_upper_ms.push_back(lo * std::exp(step * (i + 1)));
    }
    for (double ms : latency) {
      int i = static_cast<int>(std::log(std::max(ms, lo) / lo) / step);
      ++report.histogram_count[std::clamp(i, 0, kBuckets - 1)];
    }
  }
  report.queue_ms = gemm::client::Summarize(std::move(queue));
  report.h2d_ms = gemm::client::Summarize(std::move(h2d));
  report.compute_ms = gemm::client::Summarize(std::move(compute));
  report.d2h_ms = gemm::client::Summarize(std::move(d2h));
  report.server_ms = gemm::client::Summarize(std::move(server));
  return report;
}

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string JsonDistribution(const Distribution& d) {
  return absl::StrFormat(
      "{\"count\": %d, \"min\": %.6g, \"mean\": %.6g, \"p50\": %.6g, "
      "\"p90\": %.6g, \"p95\": %.6g, \"p99\": %.6g, \"p999\": %.6g, "
      "\"max\": %.6g}",
      d.count, d.min, d.mean, d.p50, d.p90, d.p95, d.p99, d.p999, d.max);
}

template <typename Map>
std::string JsonCounts(const Map& counts) {
  std::vector<std::string> parts;
  for (const auto& [key, value] : counts) {
    parts.push_back(absl::StrCat(JsonString(key), ": ", value));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

}  // namespace

absl::StatusOr<std::vector<WeightedShape>> ParseShapeMix(
    absl::string_view mix) {
  std::vector<WeightedShape> shapes;
  for (absl::string_view part : absl::StrSplit(mix, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> shape_weight = absl::StrSplit(part, ':');
    std::vector<absl::string_view> dims = absl::StrSplit(shape_weight[0], 'x');
    WeightedShape shape;
    if (shape_weight.size() > 2 || dims.size() != 3 ||
        !absl::SimpleAtoi(dims[0], &shape.problem.m) ||
        !absl::SimpleAtoi(dims[1], &shape.problem.n) ||
        !absl::SimpleAtoi(dims[2], &shape.problem.k) || shape.problem.m == 0 ||
        shape.problem.n == 0 ||
        (shape_weight.size() == 2 &&
         (!absl::SimpleAtod(shape_weight[1], &shape.weight) ||
          !(shape.weight > 0)))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shapes: '", part,
          "' is not MxNxK[:weight] (M, N >= 1, K >= 0, weight > 0)"));
    }
    shapes.push_back(shape);
  }
  if (shapes.empty()) {
    return absl::InvalidArgumentError("shapes: no shape given");
  }
  return shapes;
}

Distribution Summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = values.size();
  d.min = values.front();
  d.max = values.back();
  double sum = 0;
  for (double v : values) sum += v;
  d.mean = sum / values.size();
  d.p50 = Percentile(values, 50);
  d.p90 = Percentile(values, 90);
  d.p95 = Percentile(values, 95);
  d.p99 = Percentile(values, 99);
  d.p999 = Percentile(values, 99.9);
  return d;
}

absl::StatusOr<LoadReport> RunLoad(GemmClient* client,
                                   const LoadOptions& options) {
  if (options.shapes.empty()) {
    return absl::InvalidArgumentError("shapes: no shape given");
  }
  if (options.rate < 0 || (options.rate == 0 && options.concurrency < 1)) {
    return absl::InvalidArgumentError(
        "need a rate > 0, or a concurrency >= 1 without a rate");
  }
  if (options.count == 0 && options.duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("need a count or a duration");
  }
  // With one server, its own counters tell whether every job the client
  // sent was seen there (assuming no other client uses it meanwhile).
  absl::StatusOr<v1::InfoResponse> before = client->Info();
  LoadRun run(client, options);
  absl::StatusOr<LoadReport> report = run.Run();
  if (!report.ok()) return report;
  std::set<std::string> distinct(report->targets.begin(),
                                 report->targets.end());
  absl::StatusOr<v1::InfoResponse> after = client->Info();
  if (distinct.size() == 1 && before.ok() && after.ok() &&
      before->has_stats() && after->has_stats()) {
    report->have_server_counts = true;
    report->server_jobs_ok =
        after->stats().jobs_ok() - before->stats().jobs_ok();
    report->server_jobs_failed =
        after->stats().jobs_failed() - before->stats().jobs_failed();
    report->server_jobs_rejected =
        after->stats().jobs_rejected() - before->stats().jobs_rejected();
  }
  return report;
}

std::string FormatReportText(const LoadReport& r) {
  std::string out;
  const std::string load =
      r.mode == "rate"
          ? absl::StrFormat("rate %.1f/s (%s arrivals%s)", r.rate, r.arrivals,
                            r.concurrency > 0
                                ? absl::StrCat(", at most ", r.concurrency,
                                               " outstanding")
                                : "")
          : absl::StrFormat("concurrency %d (closed loop)", r.concurrency);
  absl::StrAppendFormat(&out, "Load: %s over %d connection(s) (%d streams) to %s\n",
                        load, r.connections, r.streams,
                        absl::StrJoin(r.targets, ", "));
  absl::StrAppendFormat(
      &out, "Shapes %s, kernel %s; warm-up %.1f s (%d jobs, not counted)\n\n",
      r.shapes, r.kernel, r.warmup_s, r.warmup_jobs);
  absl::StrAppendFormat(&out, "Summary\n");
  absl::StrAppendFormat(&out, "  count         %d (ok %d, errors %d)\n",
                        r.count, r.ok, r.errors);
  absl::StrAppendFormat(&out, "  duration      %.2f s\n", r.duration_s);
  absl::StrAppendFormat(&out, "  requests/s    %.1f\n", r.requests_per_s);
  absl::StrAppendFormat(&out, "  GFLOP/s       %.2f\n", r.gflops);
  absl::StrAppendFormat(&out, "  MB/s in       %.2f (operands sent)\n",
                        r.mb_per_s_in);
  absl::StrAppendFormat(&out, "  MB/s out      %.2f (results received)\n",
                        r.mb_per_s_out);
  if (r.have_server_counts) {
    const uint64_t server_total =
        r.server_jobs_ok + r.server_jobs_failed + r.server_jobs_rejected;
    const uint64_t client_total = r.warmup_jobs + r.count;
    absl::StrAppendFormat(
        &out,
        "  server counts %d jobs (ok %d, failed %d, rejected %d) for the "
        "client's %d (%d warm-up + %d measured%s): %s\n",
        server_total, r.server_jobs_ok, r.server_jobs_failed,
        r.server_jobs_rejected, client_total, r.warmup_jobs, r.count,
        r.server_side_jobs != client_total
            ? absl::StrCat("; ", r.server_side_jobs, " parts with --split")
            : "",
        server_total == r.server_side_jobs ? "agree" : "DISAGREE");
  }
  absl::StrAppendFormat(&out, "\nErrors by status code\n");
  if (r.errors_by_code.empty()) absl::StrAppendFormat(&out, "  none\n");
  for (const auto& [code, count] : r.errors_by_code) {
    auto sample = r.error_sample.find(code);
    absl::StrAppendFormat(
        &out, "  %-19s %d  (e.g. \"%s\")\n", code, count,
        sample == r.error_sample.end() ? "" : sample->second);
  }
  const Distribution& l = r.latency_ms;
  absl::StrAppendFormat(&out,
                        "\nLatency, client end to end, OK jobs (ms)\n"
                        "  min %.3f  mean %.3f  p50 %.3f  p90 %.3f  p95 %.3f  "
                        "p99 %.3f  p99.9 %.3f  max %.3f\n",
                        l.min, l.mean, l.p50, l.p90, l.p95, l.p99, l.p999,
                        l.max);
  absl::StrAppendFormat(&out,
                        "\nServer-side breakdown, OK jobs (ms)   mean       "
                        "p99\n");
  auto row = [&out](const char* name, const Distribution& d) {
    absl::StrAppendFormat(&out, "  %-32s %9.3f %9.3f\n", name, d.mean, d.p99);
  };
  row("queued", r.queue_ms);
  row("upload (h2d)", r.h2d_ms);
  row("compute", r.compute_ms);
  row("download (d2h)", r.d2h_ms);
  row("server total", r.server_ms);
  absl::StrAppendFormat(&out, "  %-32s %9.2f\n", "mean batch size",
                        r.mean_batch_size);
  absl::StrAppendFormat(&out, "  %-32s %9.3f\n",
                        "network + client (mean)",
                        r.latency_ms.mean - r.server_ms.mean);
  absl::StrAppendFormat(&out, "\nPer target\n");
  for (const auto& [target, ok] : r.ok_by_target) {
    auto errors = r.errors_by_target.find(target);
    absl::StrAppendFormat(
        &out, "  %-24s ok %d, errors %d\n", target, ok,
        errors == r.errors_by_target.end() ? 0 : errors->second);
  }
  absl::StrAppendFormat(&out, "\nPer device (from the server's timing)\n");
  for (const auto& [device, ok] : r.ok_by_device) {
    absl::StrAppendFormat(&out, "  %-24s ok %d\n", device, ok);
  }
  absl::StrAppendFormat(&out, "\nPer shape\n");
  for (const auto& [shape, count] : r.count_by_shape) {
    absl::StrAppendFormat(&out, "  %-24s %d\n", shape, count);
  }
  if (r.verified > 0 || r.verify_failures > 0) {
    absl::StrAppendFormat(&out, "\nVerified %d results, %d failed\n",
                          r.verified, r.verify_failures);
  }
  if (r.stream_restarts > 0) {
    absl::StrAppendFormat(&out, "\nStreams reopened after breaking: %d\n",
                          r.stream_restarts);
  }
  return out;
}

std::string FormatReportJson(const LoadReport& r) {
  std::vector<std::string> targets;
  for (const std::string& t : r.targets) targets.push_back(JsonString(t));
  std::vector<std::string> timeline;
  for (const LoadReport::Second& s : r.timeline) {
    timeline.push_back(absl::StrFormat(
        "{\"t_s\": %.0f, \"ok\": %d, \"errors\": %d, \"p50_ms\": %.6g, "
        "\"p99_ms\": %.6g, \"gflops\": %.6g}",
        s.t_s, s.ok, s.errors, s.p50_ms, s.p99_ms, s.gflops));
  }
  std::string out = "{\n";
  absl::StrAppendFormat(&out, "  \"mode\": %s,\n", JsonString(r.mode));
  absl::StrAppendFormat(&out, "  \"targets\": [%s],\n",
                        absl::StrJoin(targets, ", "));
  absl::StrAppendFormat(&out, "  \"connections\": %d,\n", r.connections);
  absl::StrAppendFormat(&out, "  \"streams\": %d,\n", r.streams);
  absl::StrAppendFormat(&out, "  \"concurrency\": %d,\n", r.concurrency);
  absl::StrAppendFormat(&out, "  \"rate\": %.6g,\n", r.rate);
  absl::StrAppendFormat(&out, "  \"arrivals\": %s,\n", JsonString(r.arrivals));
  absl::StrAppendFormat(&out, "  \"shapes\": %s,\n", JsonString(r.shapes));
  absl::StrAppendFormat(&out, "  \"kernel\": %s,\n", JsonString(r.kernel));
  absl::StrAppendFormat(&out, "  \"warmup_s\": %.6g,\n", r.warmup_s);
  absl::StrAppendFormat(&out, "  \"warmup_jobs\": %d,\n", r.warmup_jobs);
  absl::StrAppendFormat(&out, "  \"server_side_jobs\": %d,\n",
                        r.server_side_jobs);
  if (r.have_server_counts) {
    absl::StrAppendFormat(&out,
                          "  \"server_jobs_ok\": %d,\n  \"server_jobs_failed\": "
                          "%d,\n  \"server_jobs_rejected\": %d,\n",
                          r.server_jobs_ok, r.server_jobs_failed,
                          r.server_jobs_rejected);
  }
  absl::StrAppendFormat(&out, "  \"duration_s\": %.6g,\n", r.duration_s);
  absl::StrAppendFormat(&out, "  \"count\": %d,\n", r.count);
  absl::StrAppendFormat(&out, "  \"ok\": %d,\n", r.ok);
  absl::StrAppendFormat(&out, "  \"errors\": %d,\n", r.errors);
  absl::StrAppendFormat(&out, "  \"errors_by_code\": %s,\n",
                        JsonCounts(r.errors_by_code));
  std::vector<std::string> samples;
  for (const auto& [code, message] : r.error_sample) {
    samples.push_back(absl::StrCat(JsonString(code), ": ", JsonString(message)));
  }
  absl::StrAppendFormat(&out, "  \"error_sample\": {%s},\n",
                        absl::StrJoin(samples, ", "));
  absl::StrAppendFormat(&out, "  \"requests_per_s\": %.6g,\n",
                        r.requests_per_s);
  absl::StrAppendFormat(&out, "  \"gflops\": %.6g,\n", r.gflops);
  absl::StrAppendFormat(&out, "  \"mb_per_s_in\": %.6g,\n", r.mb_per_s_in);
  absl::StrAppendFormat(&out, "  \"mb_per_s_out\": %.6g,\n", r.mb_per_s_out);
  absl::StrAppendFormat(&out, "  \"latency_ms\": %s,\n",
                        JsonDistribution(r.latency_ms));
  absl::StrAppendFormat(
      &out,
      "  \"server_ms\": {\"queued\": %s, \"h2d\": %s, \"compute\": %s, "
      "\"d2h\": %s, \"total\": %s, \"mean_batch_size\": %.6g},\n",
      JsonDistribution(r.queue_ms), JsonDistribution(r.h2d_ms),
      JsonDistribution(r.compute_ms), JsonDistribution(r.d2h_ms),
      JsonDistribution(r.server_ms), r.mean_batch_size);
  absl::StrAppendFormat(&out, "  \"ok_by_target\": %s,\n",
                        JsonCounts(r.ok_by_target));
  absl::StrAppendFormat(&out, "  \"errors_by_target\": %s,\n",
                        JsonCounts(r.errors_by_target));
  absl::StrAppendFormat(&out, "  \"ok_by_device\": %s,\n",
                        JsonCounts(r.ok_by_device));
  absl::StrAppendFormat(&out, "  \"count_by_shape\": %s,\n",
                        JsonCounts(r.count_by_shape));
  absl::StrAppendFormat(&out, "  \"verified\": %d,\n", r.verified);
  absl::StrAppendFormat(&out, "  \"verify_failures\": %d,\n",
                        r.verify_failures);
  absl::StrAppendFormat(&out, "  \"stream_restarts\": %d,\n",
                        r.stream_restarts);
  absl::StrAppendFormat(
      &out, "  \"histogram\": {\"upper_ms\": [%s], \"count\": [%s]},\n",
      absl::StrJoin(r.histogram_upper_ms, ", ",
                    [](std::string* o, double v) {
                      absl::StrAppendFormat(o, "%.6g", v);
                    }),
      absl::StrJoin(r.histogram_count, ", "));
  absl::StrAppendFormat(&out, "  \"timeline\": [\n    %s\n  ]\n",
                        absl::StrJoin(timeline, ",\n    "));
  out += "}\n";
  return out;
}

std::string FormatReportCsv(const LoadReport& r) {
  std::string header =
      "mode,connections,concurrency,rate,arrivals,shapes,kernel,duration_s,"
      "count,ok,errors,errors_by_code,requests_per_s,gflops,mb_per_s_in,"
      "mb_per_s_out,latency_min_ms,latency_mean_ms,latency_p50_ms,"
      "latency_p90_ms,latency_p95_ms,latency_p99_ms,latency_p999_ms,"
      "latency_max_ms,queued_mean_ms,queued_p99_ms,h2d_mean_ms,h2d_p99_ms,"
      "compute_mean_ms,compute_p99_ms,d2h_mean_ms,d2h_p99_ms,"
      "server_mean_ms,server_p99_ms,verify_failures\n";
  std::vector<std::string> codes;
  for (const auto& [code, count] : r.errors_by_code) {
    codes.push_back(absl::StrCat(code, "=", count));
  }
  const Distribution& l = r.latency_ms;
  std::string row = absl::StrFormat(
      "%s,%d,%d,%.6g,%s,\"%s\",%s,%.6g,%d,%d,%d,\"%s\",%.6g,%.6g,%.6g,%.6g,"
      "%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,"
      "%.6g,%.6g,%.6g,%.6g,%d\n",
      r.mode, r.connections, r.concurrency, r.rate, r.arrivals, r.shapes,
      r.kernel, r.duration_s, r.count, r.ok, r.errors,
      absl::StrJoin(codes, ";"), r.requests_per_s, r.gflops, r.mb_per_s_in,
      r.mb_per_s_out, l.min, l.mean, l.p50, l.p90, l.p95, l.p99, l.p999,
      l.max, r.queue_ms.mean, r.queue_ms.p99, r.h2d_ms.mean, r.h2d_ms.p99,
      r.compute_ms.mean, r.compute_ms.p99, r.d2h_ms.mean, r.d2h_ms.p99,
      r.server_ms.mean, r.server_ms.p99, r.verify_failures);
  return header + row;
}

}  // namespace gemm::client
