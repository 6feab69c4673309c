// MeteredExecutor: the executor as GemmServer runs it. Counts each batch
// in the metrics (batch sizes, batches by kernel and device), and notices
// when a failed batch leaves the executor unable to take any more (every
// GPU failed): `on_unserviceable` runs once, then, on the worker that ran
// the batch.
//
// Thread-safety: as the executor it wraps.
//
//   executor = std::make_unique<MeteredExecutor>(std::move(executor),
//                                                &metrics, on_unserviceable);
#ifndef GEMM_SERVER_OBSERVABILITY_METERED_EXECUTOR_H_
#define GEMM_SERVER_OBSERVABILITY_METERED_EXECUTOR_H_

#include <atomic>
#include <functional>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "server/core/executor.h"
#include "server/observability/server_metrics.h"

namespace gemm::server {

class MeteredExecutor final : public ForwardingExecutor {
 public:
  MeteredExecutor(std::unique_ptr<Executor> inner, ServerMetrics* metrics,
                  std::function<void(const absl::Status&)> on_unserviceable)
      : ForwardingExecutor(std::move(inner)),
        metrics_(metrics),
        on_unserviceable_(std::move(on_unserviceable)) {}

  absl::Status Execute(const Batch& batch) override {
    absl::Status status = inner().Execute(batch);
    metrics_->BatchRan(*batch.front(), batch.size(), status);
    if (!status.ok() && !inner().serviceable() &&
        !unserviceable_.exchange(true)) {
      on_unserviceable_(status);
    }
    return status;
  }

 private:
  ServerMetrics* const metrics_;
  const std::function<void(const absl::Status&)> on_unserviceable_;
  std::atomic<bool> unserviceable_{false};
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_OBSERVABILITY_METERED_EXECUTOR_H_
