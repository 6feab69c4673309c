// CudaExecutor's kernels and the choice of one for a job (ResolveKernel):
// a named kernel checked against the devices and the precision, or auto
// through the shape tuner and the calibrated table.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/sgemm.h"
#include "server/cuda/cuda_executor.h"

namespace gemm::server {

using kernels::KernelRegistry;

std::vector<std::string> CudaExecutor::kernels() const {
  return kernels_->names();
}

std::vector<KernelDescription> CudaExecutor::kernel_details() const {
  return kernels_->descriptions();
}

absl::StatusOr<KernelHandle> CudaExecutor::ResolveKernel(
    const GemmProblem& shape, absl::string_view requested,
    Precision precision) const {
  const uint64_t needed = DeviceBytes(shape);
  if (needed > smallest_budget_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "job %s needs %d bytes of device memory; the device budget is %d",
        shape.ToString(), needed, smallest_budget_));
  }
  if (requested.empty() || requested == "auto") {
    // The tuner's and the table's choices are names of kernels() (their
    // candidates come from it): looked up here, once per job.
    const size_t at = static_cast<size_t>(precision);
    if (tuner_ != nullptr && at < tuner_allowed_.size()) {
      const std::string tuned = tuner_->Lookup(shape, tuner_allowed_[at]);
      if (KernelHandle kernel = kernels_->Find(tuned); kernel.valid()) {
        return kernel;
      }
    }
    if (at < auto_allowed_.size()) {
      const std::string chosen = policy_.Choose(shape, auto_allowed_[at]);
      if (KernelHandle kernel = kernels_->Find(chosen); kernel.valid()) {
        return kernel;
      }
    }
    for (int i = 0; i < kernels_->size(); ++i) {
      if (kernels_->at(i).precision() == precision) return kernels_->at(i);
    }
    return absl::UnimplementedError(
        absl::StrCat("params.precision: no kernel of the cuda backend "
                     "computes in ",
                     std::string(PrecisionName(precision))));
  }
  const KernelHandle kernel = kernels_->Find(requested);
  if (!kernel.valid()) {
    if (KernelRegistry::Global().Find(std::string(requested)) != nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          "params.kernel: '", requested,
          "' does not run on every GPU of this server (v12 needs compute "
          "capability 9.0); available: auto, ",
          absl::StrJoin(kernels(), ", ")));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("params.kernel: unknown kernel '", requested,
                     "' on the cuda backend; available: auto, ",
                     absl::StrJoin(kernels(), ", ")));
  }
  if (!KernelMayServe(kernel.precision(), precision)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "params.kernel: '", requested, "' computes in ",
        std::string(PrecisionName(kernel.precision())),
        " but params.precision asks for ",
        std::string(PrecisionName(precision)),
        "; set params.precision to match, or name another kernel (Info's "
        "kernel_details give each kernel's precision)"));
  }
  return kernel;
}

}  // namespace gemm::server
