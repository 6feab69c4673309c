// FaultInjectingExecutor: a test-only Executor that wraps another and adds
// one kernel name whose jobs fail with INTERNAL, as a failed device would.
// The integration tests start a server built with it (//tests:gemm-server-
// with-faults) to check that a device failure reaches the caller and that
// the server goes on serving; production builds never contain it.
//
// Thread-safety: as thread-safe as the wrapped executor (it adds no state).
//
//   GemmServer::Options options;
//   options.decorate_executor = [](std::unique_ptr<Executor> inner) {
//     return FaultInjectingExecutor::Wrap(std::move(inner), "broken"); };
#ifndef GEMM_SERVER_FAULT_INJECTING_EXECUTOR_H_
#define GEMM_SERVER_FAULT_INJECTING_EXECUTOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/executor.h"

namespace gemm::server {

class FaultInjectingExecutor final : public ForwardingExecutor {
 public:
  // `inner` with the failing kernel `fail_kernel` added (must not be empty).
  static std::unique_ptr<Executor> Wrap(std::unique_ptr<Executor> inner,
                                        std::string fail_kernel);

  // The inner executor's kernels, then the failing one.
  std::vector<std::string> kernels() const override;
  // The failing kernel resolves to itself; anything else as the inner
  // executor says.
  absl::StatusOr<std::string> ResolveKernel(
      const GemmProblem& problem, absl::string_view requested) const override;
  // INTERNAL for a batch of the failing kernel (batches share one kernel);
  // the inner executor runs every other batch.
  absl::Status Execute(const Batch& batch) override;

 private:
  FaultInjectingExecutor(std::unique_ptr<Executor> inner,
                         std::string fail_kernel)
      : ForwardingExecutor(std::move(inner)),
        fail_kernel_(std::move(fail_kernel)) {}

  const std::string fail_kernel_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_FAULT_INJECTING_EXECUTOR_H_
