#include "server/observability/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gemm::server {
namespace {

// HELP text escapes backslashes and newlines; label values double quotes
// too.
std::string Escape(const std::string& text, bool quotes) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// `{a="x",b="y"}` (with `extra`, e.g. le="0.5", last), or "" with no labels.
std::string LabelSet(const std::vector<std::string>& names,
                     const std::vector<std::string>& values,
                     const std::string& extra = "") {
  std::string out;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    absl::StrAppend(&out, out.empty() ? "" : ",", names[i], "=\"",
                    EscapeLabelValue(values[i]), "\"");
  }
  if (!extra.empty()) absl::StrAppend(&out, out.empty() ? "" : ",", extra);
  return out.empty() ? out : absl::StrCat("{", out, "}");
}

void AppendHeader(std::string* out, const std::string& name,
                  const std::string& help, const std::string& type) {
  absl::StrAppend(out, "# HELP ", name, " ", Escape(help, /*quotes=*/false),
                  "\n", "# TYPE ", name, " ", type, "\n");
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  return Escape(value, /*quotes=*/true);
}

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  const auto [end, error] =
      std::to_chars(buffer, buffer + sizeof(buffer), value);
  if (error != std::errc()) return absl::StrCat(value);
  return std::string(buffer, end);
}

Histogram::Histogram(const std::vector<double>& bounds)
    : bounds_(bounds), buckets_(new std::atomic<uint64_t>[bounds.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double value) {
  const size_t bucket =
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  double sum = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(sum, sum + value,
                                     std::memory_order_relaxed)) {
  }
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot snapshot;
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    snapshot.cumulative.push_back(total);
  }
  return snapshot;
}

CounterFamily& MetricsRegistry::AddCounter(std::string name, std::string help,
                                           std::vector<std::string> labels) {
  absl::MutexLock lock(&mu_);
  order_.emplace_back(Kind::kCounter, counters_.size());
  counters_.push_back(std::make_unique<CounterFamily>(
      std::move(name), std::move(help), std::move(labels)));
  return *counters_.back();
}

HistogramFamily& MetricsRegistry::AddHistogram(std::string name,
                                               std::string help,
                                               std::vector<std::string> labels,
                                               std::vector<double> bounds) {
  absl::MutexLock lock(&mu_);
  order_.emplace_back(Kind::kHistogram, histograms_.size());
  histograms_.push_back(std::make_unique<HistogramFamily>(
      std::move(name), std::move(help), std::move(labels), std::move(bounds)));
  return *histograms_.back();
}

void MetricsRegistry::AddGauge(std::string name, std::string help,
                               std::vector<std::string> labels,
                               Sampler sampler) {
  absl::MutexLock lock(&mu_);
  order_.emplace_back(Kind::kSampled, sampled_.size());
  sampled_.push_back(Sampled{std::move(name), std::move(help), "gauge",
                             std::move(labels), std::move(sampler)});
}

void MetricsRegistry::AddSampledCounter(std::string name, std::string help,
                                        std::vector<std::string> labels,
                                        Sampler sampler) {
  absl::MutexLock lock(&mu_);
  order_.emplace_back(Kind::kSampled, sampled_.size());
  sampled_.push_back(Sampled{std::move(name), std::move(help), "counter",
                             std::move(labels), std::move(sampler)});
}

std::string MetricsRegistry::Render() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& [kind, index] : order_) {
    switch (kind) {
      case Kind::kCounter: {
        const CounterFamily& family = *counters_[index];
        AppendHeader(&out, family.name(), family.help(), "counter");
        family.ForEach([&](const std::vector<std::string>& values,
                           const Counter& counter) {
          absl::StrAppend(&out, family.name(),
                          LabelSet(family.label_names(), values), " ",
                          counter.value(), "\n");
        });
        break;
      }
      case Kind::kHistogram: {
        const HistogramFamily& family = *histograms_[index];
        AppendHeader(&out, family.name(), family.help(), "histogram");
        family.ForEach([&](const std::vector<std::string>& values,
                           const Histogram& histogram) {
          const Histogram::Snapshot s = histogram.Read();
          const std::vector<double>& bounds = family.bounds();
          for (size_t i = 0; i < s.cumulative.size(); ++i) {
            const std::string le = absl::StrCat(
                "le=\"",
                i < bounds.size() ? FormatMetricValue(bounds[i]) : "+Inf",
                "\"");
            absl::StrAppend(&out, family.name(), "_bucket",
                            LabelSet(family.label_names(), values, le), " ",
                            s.cumulative[i], "\n");
          }
          const std::string labels = LabelSet(family.label_names(), values);
          absl::StrAppend(&out, family.name(), "_sum", labels, " ",
                          FormatMetricValue(s.sum), "\n", family.name(),
                          "_count", labels, " ", s.cumulative.back(), "\n");
        });
        break;
      }
      case Kind::kSampled: {
        const Sampled& family = sampled_[index];
        AppendHeader(&out, family.name, family.help, family.type);
        for (const Sample& sample : family.sampler()) {
          absl::StrAppend(&out, family.name,
                          LabelSet(family.label_names, sample.label_values),
                          " ", FormatMetricValue(sample.value), "\n");
        }
        break;
      }
    }
  }
  return out;
}

}  // namespace gemm::server
