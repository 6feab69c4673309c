// CudaExecutor's kernels and the choice of one for a job (ResolveKernel):
// a named kernel checked against the devices and the precision, or auto
// through the shape tuner and the calibrated table.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/sgemm.h"
#include "server/cuda/cuda_executor.h"

namespace gemm::server {

using kernels::KernelRegistry;
using kernels::SgemmKernel;

std::vector<std::string> CudaExecutor::kernels() const { return kernels_; }

std::vector<KernelDescription> CudaExecutor::kernel_details() const {
  std::vector<KernelDescription> details;
  for (const std::string& name : kernels()) {
    const SgemmKernel* kernel = KernelRegistry::Global().Find(name);
    details.push_back(KernelDescription{name, kernel->precision(),
                                        std::string(kernel->description())});
  }
  return details;
}

Precision CudaExecutor::KernelPrecision(absl::string_view name) const {
  const SgemmKernel* kernel = KernelRegistry::Global().Find(std::string(name));
  return kernel != nullptr ? kernel->precision() : Precision::kFp32;
}

absl::StatusOr<std::string> CudaExecutor::ResolveKernel(
    const GemmProblem& shape, absl::string_view requested,
    Precision precision) const {
  const uint64_t needed = DeviceBytes(shape);
  if (needed > smallest_budget_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "job %s needs %d bytes of device memory; the device budget is %d",
        shape.ToString(), needed, smallest_budget_));
  }
  if (requested.empty() || requested == "auto") {
    const size_t at = static_cast<size_t>(precision);
    if (tuner_ != nullptr && at < tuner_allowed_.size()) {
      std::string tuned = tuner_->Lookup(shape, tuner_allowed_[at]);
      if (!tuned.empty()) return tuned;
    }
    if (at < auto_allowed_.size()) {
      std::string chosen = policy_.Choose(shape, auto_allowed_[at]);
      if (!chosen.empty()) return chosen;
    }
    for (const std::string& name : kernels()) {
      if (KernelRegistry::Global().Find(name)->precision() == precision) {
        return name;
      }
    }
    return absl::UnimplementedError(
        absl::StrCat("params.precision: no kernel of the cuda backend "
                     "computes in ",
                     std::string(PrecisionName(precision))));
  }
  if (const SgemmKernel* kernel =
          KernelRegistry::Global().Find(std::string(requested));
      kernel != nullptr) {
    if (std::find(kernels_.begin(), kernels_.end(), requested) ==
        kernels_.end()) {
      return absl::UnimplementedError(absl::StrCat(
          "params.kernel: '", requested,
          "' does not run on every GPU of this server (v12 needs compute "
          "capability 9.0); available: auto, ",
          absl::StrJoin(kernels_, ", ")));
    }
    if (!KernelMayServe(kernel->precision(), precision)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "params.kernel: '", requested, "' computes in ",
          std::string(PrecisionName(kernel->precision())),
          " but params.precision asks for ",
          std::string(PrecisionName(precision)),
          "; set params.precision to match, or name another kernel (Info's "
          "kernel_details give each kernel's precision)"));
    }
    return std::string(requested);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("params.kernel: unknown kernel '", requested,
                   "' on the cuda backend; available: auto, ",
                   absl::StrJoin(kernels(), ", ")));
}

}  // namespace gemm::server
