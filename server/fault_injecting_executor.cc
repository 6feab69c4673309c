#include "server/fault_injecting_executor.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gemm::server {

std::unique_ptr<Executor> FaultInjectingExecutor::Wrap(
    std::unique_ptr<Executor> inner, std::string fail_kernel) {
  return std::unique_ptr<Executor>(
      new FaultInjectingExecutor(std::move(inner), std::move(fail_kernel)));
}

std::vector<std::string> FaultInjectingExecutor::kernels() const {
  std::vector<std::string> names = inner().kernels();
  names.push_back(fail_kernel_);
  return names;
}

absl::StatusOr<std::string> FaultInjectingExecutor::ResolveKernel(
    const GemmProblem& problem, absl::string_view requested) const {
  if (requested == fail_kernel_) return fail_kernel_;
  return inner().ResolveKernel(problem, requested);
}

absl::Status FaultInjectingExecutor::Execute(const Batch& batch) {
  if (batch.front()->kernel() == fail_kernel_) {
    return absl::InternalError(
        absl::StrCat("device failure (injected for testing on kernel '",
                     fail_kernel_, "')"));
  }
  return inner().Execute(batch);
}

}  // namespace gemm::server
