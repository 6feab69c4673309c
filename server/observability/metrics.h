// Metrics: counters and histograms kept by the server's threads, gauges read
// when scraped, and all of them rendered in Prometheus's text exposition
// format (version 0.0.4), which is what `/metrics` serves
// (metrics_endpoint.h). The names of the server's own metrics are in
// server_metrics.h.
//
// A family is one metric name with a fixed list of label names; each
// combination of label values is a cell, made on first use and kept for the
// process's life (so label values must come from small, known sets: kernel
// names, devices, status codes; never a client). Counting is lock-free on a
// cell already looked up; With() takes the family's mutex.
//
// Thread-safety: thread-safe. Families live as long as their registry.
//
//   MetricsRegistry registry;
//   CounterFamily& jobs = registry.AddCounter("gemm_jobs_total", "...",
//   {"outcome"}); jobs.With({"ok"}).Increment(); std::string text =
//   registry.Render();
#ifndef GEMM_SERVER_OBSERVABILITY_METRICS_H_
#define GEMM_SERVER_OBSERVABILITY_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gemm::server {

class Counter {
 public:
  void Increment(uint64_t n = 1) {
    value_.fetch_add(n, std::memory_order_relaxed);
  }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// Observations counted in buckets by upper bound, with their sum.
class Histogram {
 public:
  // `bounds`: the buckets' upper bounds, ascending (+Inf is implied).
  explicit Histogram(const std::vector<double>& bounds);

  void Observe(double value);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf
    double sum = 0;
  };
  // Buckets read one by one while others count: a scrape may be a few
  // observations behind in some buckets, never ahead, and never decreasing.
  Snapshot Read() const;

 private:
  const std::vector<double>& bounds_;
  // One more than bounds_: the last is +Inf.
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<double> sum_{0};
};

// Common to the families below: the name, help and label names, and the
// cells by label values.
template <typename Cell>
class MetricFamily {
 public:
  MetricFamily(std::string name, std::string help,
               std::vector<std::string> label_names)
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)) {}

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Calls `visit(label_values, cell)` for each cell, in label order.
  void ForEach(const std::function<void(const std::vector<std::string>&,
                                        const Cell&)>& visit) const {
    absl::MutexLock lock(&mu_);
    for (const auto& [values, cell] : cells_) visit(values, *cell);
  }

 protected:
  template <typename... Args>
  Cell& Find(std::vector<std::string> label_values, Args&&... args) {
    absl::MutexLock lock(&mu_);
    std::unique_ptr<Cell>& cell = cells_[std::move(label_values)];
    if (cell == nullptr) cell = std::make_unique<Cell>(args...);
    return *cell;
  }

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Cell>> cells_
      ABSL_GUARDED_BY(mu_);
};

class CounterFamily : public MetricFamily<Counter> {
 public:
  using MetricFamily::MetricFamily;
  // The cell of these label values (one per label name, in order).
  Counter& With(std::vector<std::string> label_values) {
    return Find(std::move(label_values));
  }
};

class HistogramFamily : public MetricFamily<Histogram> {
 public:
  HistogramFamily(std::string name, std::string help,
                  std::vector<std::string> label_names,
                  std::vector<double> bounds)
      : MetricFamily(std::move(name), std::move(help), std::move(label_names)),
        bounds_(std::move(bounds)) {}
  Histogram& With(std::vector<std::string> label_values) {
    return Find(std::move(label_values), bounds_);
  }
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
};

// Values read at scrape time (a queue's depth, a pool's size), as samples
// of a gauge or of a counter kept elsewhere.
struct Sample {
  std::vector<std::string> label_values;
  double value = 0;
};
using Sampler = std::function<std::vector<Sample>()>;

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // `name` ends in _total.
  CounterFamily& AddCounter(std::string name, std::string help,
                            std::vector<std::string> label_names = {});
  HistogramFamily& AddHistogram(std::string name, std::string help,
                                std::vector<std::string> label_names,
                                std::vector<double> bounds);
  // A gauge, or (AddSampledCounter) a counter, whose samples `sampler`
  // returns at each scrape. The sampler runs on the scraping thread and
  // must stay valid as long as the registry is rendered.
  void AddGauge(std::string name, std::string help,
                std::vector<std::string> label_names, Sampler sampler);
  void AddSampledCounter(std::string name, std::string help,
                         std::vector<std::string> label_names, Sampler sampler);

  // Every family, in the order added, in the text exposition format.
  std::string Render() const;

 private:
  struct Sampled {
    std::string name;
    std::string help;
    std::string type;  // "gauge" or "counter"
    std::vector<std::string> label_names;
    Sampler sampler;
  };
  // Renders the family at `index` of its kind.
  enum class Kind { kCounter, kHistogram, kSampled };

  mutable absl::Mutex mu_;
  std::vector<std::pair<Kind, size_t>> order_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<CounterFamily>> counters_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<HistogramFamily>> histograms_
      ABSL_GUARDED_BY(mu_);
  std::vector<Sampled> sampled_ ABSL_GUARDED_BY(mu_);
};

// A label value or HELP text escaped for the text format; a number as
// Prometheus reads it (shortest round trip, +Inf, NaN).
std::string EscapeLabelValue(const std::string& value);
std::string FormatMetricValue(double value);

}  // namespace gemm::server

#endif  // GEMM_SERVER_OBSERVABILITY_METRICS_H_
