// JobCounts: Info's job counters (ServerStats), kept by what each caller
// was sent, and the same answers counted in the server's metrics
// (server_metrics.h: by status code, kernel and device, with the phase
// times of delivered jobs).
//
// A job counts once. Turned away before it was accepted (invalid, over a
// limit, queue or budget full, shutting down): rejected, as its error is
// decided. Accepted: ok when its result leaves for the caller; failed when
// its error does, or when the call ended first (cancelled, deadline passed,
// stream broken: counted as CANCELLED), so that a result nobody received
// is not counted as delivered. Each count is made before the answer is
// handed to gRPC, so a caller that has its answer finds it counted.
//
// Thread-safety: thread-safe.
//
//   if (status.ok()) counts.CountDelivered(job);
//   else counts.CountFailed(status.code(), job);
//   reactor->Finish(ToGrpcStatus(status));
#ifndef GEMM_SERVER_OBSERVABILITY_JOB_COUNTS_H_
#define GEMM_SERVER_OBSERVABILITY_JOB_COUNTS_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "server/core/gemm_job.h"
#include "server/observability/server_metrics.h"

namespace gemm::server {

class JobCounts {
 public:
  // `metrics` (may be null: Info's counts only) must outlive the counts.
  explicit JobCounts(ServerMetrics* metrics = nullptr) : metrics_(metrics) {}

  void CountRejected(absl::StatusCode code) {
    rejected_.fetch_add(1);
    if (metrics_ != nullptr) metrics_->JobRejected(code);
  }
  // An accepted job whose result left for its caller.
  void CountDelivered(const GemmJob& job) {
    ok_.fetch_add(1);
    if (job.timing().check.ran) checked_.fetch_add(1);
    if (metrics_ != nullptr) metrics_->JobDelivered(job);
  }
  // An accepted job that answered with an error (`code`), or whose call
  // ended first (kCancelled).
  void CountFailed(absl::StatusCode code, const JobLabels& job) {
    failed_.fetch_add(1);
    if (metrics_ != nullptr) metrics_->JobFailed(code, job);
  }
  void CountFailed(absl::StatusCode code, const GemmJob& job) {
    CountFailed(code, JobLabels::Of(job));
  }

  // Bytes of gemm.v1 messages received and sent (metrics only).
  void CountReceived(uint64_t bytes) {
    if (metrics_ != nullptr) metrics_->BytesReceived(bytes);
  }
  void CountSent(uint64_t bytes) {
    if (metrics_ != nullptr) metrics_->BytesSent(bytes);
  }

  uint64_t ok() const { return ok_.load(); }
  uint64_t failed() const { return failed_.load(); }
  uint64_t rejected() const { return rejected_.load(); }
  // Delivered jobs whose result was checked.
  uint64_t checked() const { return checked_.load(); }

 private:
  ServerMetrics* const metrics_;
  std::atomic<uint64_t> ok_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> checked_{0};
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_OBSERVABILITY_JOB_COUNTS_H_
