// FaultInjectingExecutor: a test-only Executor that wraps another and adds
// kernel names that misbehave as a failing device would: jobs of the
// failing kernel fail with INTERNAL; jobs of the stuck kernel hold their
// worker for a long time, deaf to cancellation, as a hung device would. The
// integration tests start a server built with it (//tests:gemm-server-with-
// faults) to check that a device failure reaches the caller, that the
// server goes on serving, and that shutdown is bounded even so; production
// builds never contain it.
//
// Thread-safety: as thread-safe as the wrapped executor (its own state is
// immutable).
//
//   GemmServer::Options options;
//   options.decorate_executor = [](std::unique_ptr<Executor> inner) {
//     return FaultInjectingExecutor::Wrap(std::move(inner), "broken"); };
#ifndef GEMM_SERVER_CPU_FAULT_INJECTING_EXECUTOR_H_
#define GEMM_SERVER_CPU_FAULT_INJECTING_EXECUTOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/core/executor.h"

namespace gemm::server {

class FaultInjectingExecutor final : public ForwardingExecutor {
 public:
  struct Options {
    // Jobs naming it fail with INTERNAL. Default empty: none.
    std::string fail_kernel;
    // Jobs naming it sleep `stuck_for` before they run. Default empty.
    std::string stuck_kernel;
    absl::Duration stuck_for = absl::Minutes(10);
  };

  // `inner` with the failing kernel `fail_kernel` added (must not be empty).
  static std::unique_ptr<Executor> Wrap(std::unique_ptr<Executor> inner,
                                        std::string fail_kernel);
  // `inner` with the options' kernels added (the empty ones left out).
  static std::unique_ptr<Executor> Wrap(std::unique_ptr<Executor> inner,
                                        Options options);

  // The inner executor's kernels, then the added ones.
  std::vector<std::string> kernels() const override;
  // An added kernel resolves to itself; anything else as the inner
  // executor says.
  std::vector<KernelDescription> kernel_details() const override;
  absl::StatusOr<KernelHandle> ResolveKernel(
      const GemmProblem& problem, absl::string_view requested,
      Precision precision = Precision::kFp32) const override;
  // INTERNAL for a batch of the failing kernel (batches share one kernel);
  // a batch of the stuck kernel sleeps `stuck_for`, then fails so too; the
  // inner executor runs every other batch.
  absl::Status Execute(const Batch& batch) override;

 private:
  FaultInjectingExecutor(std::unique_ptr<Executor> inner, Options options);

  const Options options_;
  // The added kernels (the options' non-empty names), in that order.
  const KernelTable added_;
  const KernelHandle fail_;   // no kernel when fail_kernel is empty
  const KernelHandle stuck_;  // no kernel when stuck_kernel is empty
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CPU_FAULT_INJECTING_EXECUTOR_H_
