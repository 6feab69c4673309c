#include "kernels/sgemm.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cublas_sgemm.h"
#include "kernels/sgemm_kernels.h"

namespace gemm::kernels {

absl::Status CudaStatus(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(std::string(what), ": ", cudaGetErrorString(err)));
}

SgemmArgs MakeSgemmArgs(const GemmProblem& problem, const float* a,
                        const float* b, float* c) {
  SgemmArgs args;
  args.m = static_cast<int>(problem.m);
  args.n = static_cast<int>(problem.n);
  args.k = static_cast<int>(problem.k);
  args.trans_a = problem.trans_a;
  args.trans_b = problem.trans_b;
  args.alpha = problem.alpha;
  args.beta = problem.beta;
  args.a = a;
  args.lda = problem.lda();
  args.b = b;
  args.ldb = problem.ldb();
  args.c = c;
  args.ldc = problem.ldc();
  return args;
}

absl::Status ValidateSgemmArgs(const SgemmArgs& args) {
  if (args.m < 0 || args.n < 0 || args.k < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sizes must be >= 0, got m=", args.m, " n=", args.n, " k=", args.k));
  }
  if (args.batch_count < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_count must be >= 1, got ", args.batch_count));
  }
  if (args.m == 0 || args.n == 0)
    return absl::OkStatus();  // nothing is read or written

  if (args.c == nullptr) return absl::InvalidArgumentError("c is null");
  if (args.ldc < args.n) {
    return absl::InvalidArgumentError(
        absl::StrCat("ldc=", args.ldc, " < n=", args.n));
  }
  if (args.k > 0) {
    if (args.a == nullptr || args.b == nullptr) {
      return absl::InvalidArgumentError("a or b is null while k > 0");
    }
    // The stored A is m x k (k x m when transposed), row-major.
    const int a_cols = args.trans_a ? args.m : args.k;
    if (args.lda < a_cols) {
      return absl::InvalidArgumentError(absl::StrCat(
          "lda=", args.lda, " < ", a_cols,
          " (columns of the stored A, trans_a=", args.trans_a, ")"));
    }
    const int b_cols = args.trans_b ? args.k : args.n;
    if (args.ldb < b_cols) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ldb=", args.ldb, " < ", b_cols,
          " (columns of the stored B, trans_b=", args.trans_b, ")"));
    }
  }
  if (args.batch_count > 1) {
    if (args.stride_a < 0 || args.stride_b < 0) {
      return absl::InvalidArgumentError("stride_a and stride_b must be >= 0");
    }
    // Batch members write their C concurrently: their C matrices must not
    // overlap.
    const int64_t c_extent =
        static_cast<int64_t>(args.m - 1) * args.ldc + args.n;
    if (args.stride_c < c_extent) {
      return absl::InvalidArgumentError(
          absl::StrCat("stride_c=", args.stride_c, " < ", c_extent,
                       ": batch members' C would overlap"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateStream(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy) {
    return absl::InvalidArgumentError(
        "an explicit stream is required (not null, not cudaStreamLegacy)");
  }
  return absl::OkStatus();
}

absl::Status KernelRegistry::Register(std::unique_ptr<SgemmKernel> kernel) {
  if (kernel == nullptr) return absl::InvalidArgumentError("null kernel");
  if (Find(kernel->name()) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat(
        "kernel '", std::string(kernel->name()), "' already registered"));
  }
  kernels_.push_back(std::move(kernel));
  return absl::OkStatus();
}

const SgemmKernel* KernelRegistry::Find(std::string_view name) const {
  const auto it =
      std::find_if(kernels_.begin(), kernels_.end(),
                   [&](const auto& kernel) { return kernel->name() == name; });
  return it == kernels_.end() ? nullptr : it->get();
}

std::vector<std::string> KernelRegistry::Names() const {
  std::vector<std::string> names;
  names.reserve(kernels_.size());
  for (const auto& kernel : kernels_) names.emplace_back(kernel->name());
  return names;
}

const KernelRegistry& KernelRegistry::Global() {
  // Built on first use and never destroyed, so kernels stay valid for
  // threads still running during static destruction.
  static const KernelRegistry* const registry = [] {
    auto* r = new KernelRegistry;
    std::vector<std::unique_ptr<SgemmKernel>> kernels = MakeChapterKernels();
    kernels.push_back(MakeCublasSgemmKernel());
    for (auto& kernel : MakeCublasTensorCoreKernels()) {
      kernels.push_back(std::move(kernel));
    }
    for (auto& kernel : kernels)
      r->Register(std::move(kernel)).IgnoreError();  // names are distinct
    return r;
  }();
  return *registry;
}

}  // namespace gemm::kernels
