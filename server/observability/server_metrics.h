// ServerMetrics: what gemm-server tells an operator through `/metrics`,
// named the Prometheus way (gemm_ prefix, base units, _total counters,
// _seconds histograms) after Triton's nv_inference_* metrics. This class
// keeps what the service counts as it goes (jobs by outcome, status code,
// kernel and device; the phase times of delivered jobs; batch sizes; bytes
// in and out); GemmServer adds the gauges read at scrape time (queue,
// in-flight bytes, device and pinned memory, streams, connections, build
// and process information). docs/reference/metrics.md lists every metric.
//
// Thread-safety: thread-safe.
//
//   ServerMetrics metrics;
//   metrics.JobDelivered(job);
//   std::string text = metrics.registry().Render();
#ifndef GEMM_SERVER_OBSERVABILITY_SERVER_METRICS_H_
#define GEMM_SERVER_OBSERVABILITY_SERVER_METRICS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/core/gemm_job.h"
#include "server/observability/metrics.h"

namespace gemm::server {

// The kernel and device labels of a job: the kernel that ran (or would
// have), and the first word of where it ran ("cpu", "cuda:0", "host" for
// K = 0 on CUDA); "none" for what is not known (a job refused before its
// kernel was resolved, or failed before it ran).
struct JobLabels {
  std::string kernel = "none";
  std::string device = "none";
  static JobLabels Of(const GemmJob& job);
};

class ServerMetrics {
 public:
  ServerMetrics();

  MetricsRegistry& registry() { return registry_; }

  // A job turned away before it was accepted.
  void JobRejected(absl::StatusCode code);
  // An accepted job whose result left for its caller: counted as ok, and
  // its times and batch observed.
  void JobDelivered(const GemmJob& job);
  // An accepted job that ended with an error, or whose call ended first
  // (kCancelled).
  void JobFailed(absl::StatusCode code, const JobLabels& job);
  // A batch the executor ran (`status` its result).
  void BatchRan(const GemmJob& first, size_t jobs, const absl::Status& status);
  // Message bytes of gemm.v1 calls, as gRPC hands them over (before HTTP/2
  // and TLS framing).
  void BytesReceived(uint64_t bytes) { received_bytes_.Increment(bytes); }
  void BytesSent(uint64_t bytes) { sent_bytes_.Increment(bytes); }

 private:
  MetricsRegistry registry_;
  CounterFamily& jobs_;
  HistogramFamily& queue_seconds_;
  HistogramFamily& h2d_seconds_;
  HistogramFamily& compute_seconds_;
  HistogramFamily& d2h_seconds_;
  HistogramFamily& server_seconds_;
  HistogramFamily& check_seconds_;
  CounterFamily& checked_jobs_;
  HistogramFamily& batch_size_;
  CounterFamily& batches_;
  Counter& received_bytes_;
  Counter& sent_bytes_;
};

// The process_* metrics of Prometheus's client libraries, read from /proc:
// resident and virtual memory, CPU seconds, open and maximum descriptors,
// start time.
void AddProcessMetrics(MetricsRegistry& registry);

}  // namespace gemm::server

#endif  // GEMM_SERVER_OBSERVABILITY_SERVER_METRICS_H_
