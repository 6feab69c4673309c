#include "server/cpu_executor.h"

#include <cblas.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gemm::server {
absl::StatusOr<std::unique_ptr<CpuExecutor>> CpuExecutor::Create(
    const Options& options) {
  if (options.threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads must be 0 or more, got ", options.threads));
  }
  if (options.threads > 0) openblas_set_num_threads(options.threads);
  return std::unique_ptr<CpuExecutor>(new CpuExecutor(options));
}

std::vector<DeviceDescription> CpuExecutor::devices() const {
  DeviceDescription cpu;
  cpu.id = "cpu";
  cpu.name =
      absl::StrFormat("OpenBLAS (%s, %d threads)", openblas_get_corename(),
                      openblas_get_num_threads());
  return {cpu};
}

std::vector<std::string> CpuExecutor::kernels() const { return {kKernelName}; }

absl::StatusOr<std::string> CpuExecutor::ResolveKernel(
    const GemmProblem& problem, absl::string_view requested) const {
  (void)problem;
  if (requested.empty() || requested == "auto" || requested == kKernelName) {
    return std::string(kKernelName);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("params.kernel: unknown kernel '", requested,
                   "' on the cpu backend; available: auto, ",
                   absl::StrJoin(kernels(), ", ")));
}

absl::Status CpuExecutor::Execute(const Batch& batch) {
  absl::MutexLock lock(&mu_);
  for (const std::shared_ptr<GemmJob>& job : batch) {
    const GemmProblem& s = job->problem();
    const absl::Time start = absl::Now();
    cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans,
                s.trans_b ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, s.alpha,
                job->a(), s.lda(), job->b(), s.ldb(), s.beta, job->c(),
                s.ldc());
    JobTiming& t = job->timing();
    t.compute = absl::Now() - start;
    t.batch_size = static_cast<uint32_t>(batch.size());
    t.device = "cpu";
  }
  return absl::OkStatus();
}

}  // namespace gemm::server
