#include "server/cpu/fault_injecting_executor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace gemm::server {

std::unique_ptr<Executor> FaultInjectingExecutor::Wrap(
    std::unique_ptr<Executor> inner, std::string fail_kernel) {
  Options options;
  options.fail_kernel = std::move(fail_kernel);
  return Wrap(std::move(inner), std::move(options));
}

std::unique_ptr<Executor> FaultInjectingExecutor::Wrap(
    std::unique_ptr<Executor> inner, Options options) {
  return std::unique_ptr<Executor>(
      new FaultInjectingExecutor(std::move(inner), std::move(options)));
}

bool FaultInjectingExecutor::IsAdded(absl::string_view kernel) const {
  return !kernel.empty() &&
         (kernel == options_.fail_kernel || kernel == options_.stuck_kernel);
}

std::vector<std::string> FaultInjectingExecutor::kernels() const {
  std::vector<std::string> names = inner().kernels();
  if (!options_.fail_kernel.empty()) names.push_back(options_.fail_kernel);
  if (!options_.stuck_kernel.empty()) names.push_back(options_.stuck_kernel);
  return names;
}

std::vector<KernelDescription> FaultInjectingExecutor::kernel_details() const {
  std::vector<KernelDescription> details = inner().kernel_details();
  for (const std::string* added :
       {&options_.fail_kernel, &options_.stuck_kernel}) {
    if (!added->empty()) {
      details.push_back(KernelDescription{
          *added, Precision::kFp32, "fails as a broken device would (tests)"});
    }
  }
  return details;
}

absl::StatusOr<std::string> FaultInjectingExecutor::ResolveKernel(
    const GemmProblem& problem, absl::string_view requested,
    Precision precision) const {
  if (IsAdded(requested)) return std::string(requested);
  return inner().ResolveKernel(problem, requested, precision);
}

absl::Status FaultInjectingExecutor::Execute(const Batch& batch) {
  const std::string& kernel = batch.front()->kernel();
  if (!options_.fail_kernel.empty() && kernel == options_.fail_kernel) {
    return absl::InternalError(
        absl::StrCat("device failure (injected for testing on kernel '",
                     options_.fail_kernel, "')"));
  }
  if (!options_.stuck_kernel.empty() && kernel == options_.stuck_kernel) {
    absl::SleepFor(options_.stuck_for);
    return absl::InternalError(
        absl::StrCat("device hung (injected for testing on kernel '",
                     options_.stuck_kernel, "')"));
  }
  return inner().Execute(batch);
}

}  // namespace gemm::server
