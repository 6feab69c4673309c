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

namespace {

std::vector<KernelDescription> AddedKernels(
    const FaultInjectingExecutor::Options& options) {
  std::vector<KernelDescription> added;
  for (const std::string* name :
       {&options.fail_kernel, &options.stuck_kernel}) {
    if (!name->empty()) {
      added.push_back(KernelDescription{
          *name, Precision::kFp32, "fails as a broken device would (tests)"});
    }
  }
  return added;
}

}  // namespace

FaultInjectingExecutor::FaultInjectingExecutor(std::unique_ptr<Executor> inner,
                                               Options options)
    : ForwardingExecutor(std::move(inner)),
      options_(std::move(options)),
      added_(AddedKernels(options_)),
      fail_(options_.fail_kernel.empty() ? KernelHandle()
                                         : added_.Find(options_.fail_kernel)),
      stuck_(options_.stuck_kernel.empty()
                 ? KernelHandle()
                 : added_.Find(options_.stuck_kernel)) {}

std::vector<std::string> FaultInjectingExecutor::kernels() const {
  std::vector<std::string> names = inner().kernels();
  for (std::string& name : added_.names()) names.push_back(std::move(name));
  return names;
}

std::vector<KernelDescription> FaultInjectingExecutor::kernel_details() const {
  std::vector<KernelDescription> details = inner().kernel_details();
  for (KernelDescription& added : added_.descriptions()) {
    details.push_back(std::move(added));
  }
  return details;
}

absl::StatusOr<KernelHandle> FaultInjectingExecutor::ResolveKernel(
    const GemmProblem& problem, absl::string_view requested,
    Precision precision) const {
  if (KernelHandle added = added_.Find(requested); added.valid()) return added;
  return inner().ResolveKernel(problem, requested, precision);
}

absl::Status FaultInjectingExecutor::Execute(const Batch& batch) {
  const KernelHandle& kernel = batch.front()->kernel();
  if (fail_.valid() && kernel == fail_) {
    return absl::InternalError(
        absl::StrCat("device failure (injected for testing on kernel '",
                     options_.fail_kernel, "')"));
  }
  if (stuck_.valid() && kernel == stuck_) {
    absl::SleepFor(options_.stuck_for);
    return absl::InternalError(
        absl::StrCat("device hung (injected for testing on kernel '",
                     options_.stuck_kernel, "')"));
  }
  return inner().Execute(batch);
}

}  // namespace gemm::server
