#include "server/cpu_executor.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/abft.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

// GEMMs smaller than this (M*N*K) run on one OpenBLAS thread. OpenBLAS's
// helper threads spin (sched_yield) for a while after each GEMM they take
// part in, so a steady stream of small jobs kept one core busy doing
// nothing: on a 2-core host, a client at 200 jobs/s of 64^3 and 256^3 cost
// the server 6 CPU-seconds in 6 s, against 0.6 on one thread, and that
// core is gRPC's. A 512^3 GEMM is where a second thread starts to pay.
constexpr uint64_t kThreadedMinVolume = uint64_t{1} << 27;

}  // namespace

void CpuExecutor::Sgemm(GemmJob& job) {
  const GemmProblem& s = job.problem();
  const int threads =
      uint64_t{s.m} * s.n * s.k < kThreadedMinVolume ? 1 : full_threads_;
  if (threads != current_threads_) {
    openblas_set_num_threads(threads);
    current_threads_ = threads;
  }
  cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans,
              s.trans_b ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, s.alpha,
              job.a(), s.lda(), job.b(), s.ldb(), s.beta, job.c(), s.ldc());
}

namespace {

// The result's sums into `scratch` (cleared first), and the verdict.
abft::Verdict Judge(GemmJob& job, std::vector<double>& scratch) {
  const GemmProblem& s = job.problem();
  const abft::Layout l(s);
  using abft::Layout;
  std::fill_n(scratch.begin() + l.row(Layout::kActual), s.m, 0.0);
  std::fill_n(scratch.begin() + l.col(Layout::kActual), s.n, 0.0);
  abft::Reduce2DOnHost(abft::OutputCPass(s, job.c(), scratch.data()));
  return abft::JudgeAll(s, scratch.data());
}

}  // namespace

absl::StatusOr<std::unique_ptr<CpuExecutor>> CpuExecutor::Create(
    const Options& options) {
  if (options.threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads must be 0 or more, got ", options.threads));
  }
  // OpenBLAS's own count (all cores, or OPENBLAS_NUM_THREADS), read before
  // any executor of this process has changed it.
  static const int kOpenBlasDefault = openblas_get_num_threads();
  const int threads = options.threads > 0 ? options.threads : kOpenBlasDefault;
  openblas_set_num_threads(threads);
  return std::unique_ptr<CpuExecutor>(new CpuExecutor(options, threads));
}

std::vector<DeviceDescription> CpuExecutor::devices() const {
  DeviceDescription cpu;
  cpu.id = "cpu";
  cpu.name = absl::StrFormat("OpenBLAS (%s, %d threads)",
                             openblas_get_corename(), full_threads_);
  cpu.check_mismatches = check_mismatches_.load();
  return {cpu};
}

std::vector<std::string> CpuExecutor::kernels() const { return {kKernelName}; }

std::vector<KernelDescription> CpuExecutor::kernel_details() const {
  return {KernelDescription{kKernelName, Precision::kFp32,
                            "OpenBLAS cblas_sgemm on the host"}};
}

absl::StatusOr<std::string> CpuExecutor::ResolveKernel(
    const GemmProblem& problem, absl::string_view requested,
    Precision precision) const {
  (void)problem;
  if (!KernelMayServe(Precision::kFp32, precision)) {
    return absl::UnimplementedError(absl::StrCat(
        "params.precision: the cpu backend computes in fp32 only, not ",
        std::string(PrecisionName(precision)), "; ask for PRECISION_FP32"));
  }
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
    JobTiming& t = job->timing();
    t.batch_size = static_cast<uint32_t>(batch.size());
    t.device = "cpu";
    absl::Status status = Run(*job);
    // The job fails alone; the batch goes on.
    if (!status.ok()) job->Finish(std::move(status));
  }
  return absl::OkStatus();
}

absl::Status CpuExecutor::Run(GemmJob& job) {
  JobTiming& t = job.timing();
  // The result goes somewhere else than the input C (one of them is in a
  // region): it starts as a copy of the input, which the GEMM updates.
  if (job.problem().beta != 0.0f && job.c() != job.c_in()) {
    std::copy_n(job.c_in(), job.problem().c_elements(), job.c());
  }
  if (!job.spec().check) {
    const absl::Time start = absl::Now();
    Sgemm(job);
    t.compute = absl::Now() - start;
    if (corrupter_) corrupter_(ResultSite{&job, job.c(), nullptr, 0});
    return absl::OkStatus();
  }
  const GemmProblem& s = job.problem();
  // The predictions, and the input C (kept for a re-run) with its sums.
  absl::Time start = absl::Now();
  std::vector<double> scratch(abft::Layout(s).slots(), 0.0);
  std::vector<float> c_in;
  if (s.beta != 0.0f) {
    abft::Reduce2DOnHost(abft::InputCPass(s, job.c(), scratch.data()));
    c_in.assign(job.c(), job.c() + s.c_elements());
  }
  for (const abft::Pass& pass :
       abft::OperandPasses(s, job.a(), job.b(), scratch.data())) {
    abft::Reduce2DOnHost(pass);
  }
  JobCheck& check = t.check;
  check.ran = true;
  check.time = absl::Now() - start;
  for (int run = 0; run < 2; ++run) {
    if (run > 0 && s.beta != 0.0f) std::copy(c_in.begin(), c_in.end(), job.c());
    start = absl::Now();
    Sgemm(job);
    t.compute = absl::Now() - start;
    if (corrupter_) corrupter_(ResultSite{&job, job.c(), nullptr, run});
    start = absl::Now();
    const abft::Verdict verdict = Judge(job, scratch);
    check.time += absl::Now() - start;
    if (verdict.ok()) {
      check.worst_ratio = verdict.worst_ratio;
      check.unchecked_lines = verdict.unchecked_lines;
      if (run > 0) {
        absl::StrAppend(&check.detail, "; a re-run on ", kKernelName,
                        " passed");
        check.rerun_kernel = kKernelName;
      }
      return absl::OkStatus();
    }
    check_mismatches_.fetch_add(1);
    ++check.mismatches;
    const std::string what = absl::StrFormat(
        "run %d on %s (cpu) failed its check: %d of %d rows and columns off, "
        "worst %s at %.3g times its tolerance",
        run + 1, kKernelName, verdict.bad_lines, uint64_t{s.m} + s.n,
        abft::LineName(s, verdict.worst_line), verdict.worst_ratio);
    spdlog::error("job {}: {}", s.ToString(), what);
    absl::StrAppend(&check.detail, check.detail.empty() ? "" : "; ", what);
  }
  // C updated in place in the caller's region keeps its input.
  if (s.beta != 0.0f && job.c() == job.c_in()) {
    std::copy(c_in.begin(), c_in.end(), job.c());
  }
  return absl::DataLossError(
      absl::StrCat("the result failed its check twice, so none is returned: ",
                   check.detail));
}

}  // namespace gemm::server
