#include "server/cpu/cpu_executor.h"

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

// A light job's most C elements (1 MiB): writing C is work too, and the
// first touch of fresh pages is the larger part of a small-K job.
constexpr uint64_t kLightMaxElements = uint64_t{1} << 18;

// A heavy job runs in tiles of C of at most kTileSide x kTileSide, each in
// steps over K of about kStepVolume (M*N*K: 2^29, 1.1 GFLOP, some 12 ms on
// two cores), at least 256 deep, the first with the job's beta and the
// others adding to C. Each step repacks its share of A and B: on two cores
// a 4096^3 GEMM runs 5-10% slower than whole (square tiles of 384 with
// whole K: 12-16%; steps of 2^30: no better).
constexpr uint32_t kTileSide = 1024;
constexpr uint64_t kStepVolume = uint64_t{1} << 29;
constexpr uint32_t kMinStepDepth = 256;

uint32_t StepDepth(uint32_t rows, uint32_t cols, uint32_t k) {
  const uint64_t depth = kStepVolume / (uint64_t{rows} * cols) / 64 * 64;
  // Not std::clamp: K may be under kMinStepDepth.
  return static_cast<uint32_t>(
      std::min<uint64_t>(std::max<uint64_t>(depth, kMinStepDepth), k));
}

}  // namespace

bool CpuExecutor::IsLight(const GemmProblem& problem) {
  return uint64_t{problem.m} * problem.n * problem.k < kThreadedMinVolume &&
         problem.c_elements() <= kLightMaxElements;
}

void CpuExecutor::Sgemm(GemmJob& job, float* c) {
  const GemmProblem& s = job.problem();
  if (s.k == 0) {
    // C = beta * C needs no OpenBLAS, nor its turn.
    ScaleByBeta(c, s.c_elements(), s.beta);
    return;
  }
  if (IsLight(s)) {
    TurnQueue::Turn turn(&turns_);
    absl::MutexLock lock(&mu_);
    SgemmTile(job, c, {0, s.m}, {0, s.n}, {0, s.k});
    return;
  }
  // A fresh C takes its pages as it is first written: that happens here,
  // before any turn at OpenBLAS, when C is not read.
  if (s.beta == 0.0f) std::fill_n(c, s.c_elements(), 0.0f);
  for (uint32_t row = 0; row < s.m; row += kTileSide) {
    for (uint32_t col = 0; col < s.n; col += kTileSide) {
      const uint32_t rows = std::min(kTileSide, s.m - row);
      const uint32_t cols = std::min(kTileSide, s.n - col);
      const uint32_t step = StepDepth(rows, cols, s.k);
      for (uint32_t depth = 0; depth < s.k; depth += step) {
        // Light jobs that asked during the last step go first.
        TurnQueue::Turn turn(&turns_);
        absl::MutexLock lock(&mu_);
        SgemmTile(job, c, {row, rows}, {col, cols},
                  {depth, std::min(step, s.k - depth)});
      }
    }
  }
}

void CpuExecutor::SgemmTile(GemmJob& job, float* c, Span rows, Span cols,
                            Span depth) {
  const GemmProblem& s = job.problem();
  const int threads =
      uint64_t{rows.size} * cols.size * depth.size < kThreadedMinVolume
          ? 1
          : full_threads_;
  if (threads != current_threads_) {
    openblas_set_num_threads(threads);
    current_threads_ = threads;
  }
  // Row-major: op(A) is M x K (A, or A's transpose stored K x M), op(B)
  // K x N likewise. Steps after the first add to C.
  const float* a =
      job.a() + (s.trans_a ? uint64_t{depth.start} * s.lda() + rows.start
                           : uint64_t{rows.start} * s.lda() + depth.start);
  const float* b =
      job.b() + (s.trans_b ? uint64_t{cols.start} * s.ldb() + depth.start
                           : uint64_t{depth.start} * s.ldb() + cols.start);
  cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans,
              s.trans_b ? CblasTrans : CblasNoTrans, rows.size, cols.size,
              depth.size, s.alpha, a, s.lda(), b, s.ldb(),
              depth.start == 0 ? s.beta : 1.0f,
              c + uint64_t{rows.start} * s.ldc() + cols.start, s.ldc());
}

namespace {

// The sums of the result `c` into `scratch` (cleared first), and the
// verdict, suspect lines verified against the operands (common/abft.h).
abft::Verdict Judge(GemmJob& job, const float* c, const float* c_in,
                    std::vector<double>& scratch) {
  const GemmProblem& s = job.problem();
  const abft::Layout l(s);
  using abft::Layout;
  std::fill_n(scratch.begin() + l.row(Layout::kActual), s.m, 0.0);
  std::fill_n(scratch.begin() + l.col(Layout::kActual), s.n, 0.0);
  abft::Reduce2DOnHost(abft::OutputCPass(s, c, scratch.data()));
  return abft::JudgeAll(s, scratch.data(),
                        abft::Operands{job.a(), job.b(), c, c_in});
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

std::vector<std::string> CpuExecutor::kernels() const {
  return kernels_.names();
}

std::vector<KernelDescription> CpuExecutor::kernel_details() const {
  return kernels_.descriptions();
}

absl::StatusOr<KernelHandle> CpuExecutor::ResolveKernel(
    const GemmProblem& problem, absl::string_view requested,
    Precision precision) const {
  (void)problem;
  if (!KernelMayServe(Precision::kFp32, precision)) {
    return absl::UnimplementedError(absl::StrCat(
        "params.precision: the cpu backend computes in fp32 only, not ",
        std::string(PrecisionName(precision)), "; ask for PRECISION_FP32"));
  }
  if (requested.empty() || requested == "auto" || requested == kKernelName) {
    return kernels_.at(0);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("params.kernel: unknown kernel '", requested,
                   "' on the cpu backend; available: auto, ",
                   absl::StrJoin(kernels(), ", ")));
}

absl::Status CpuExecutor::Execute(const Batch& batch) {
  if (kernels_.IndexOf(batch.front()->kernel()) < 0) {
    return absl::InternalError(
        absl::StrCat("kernel '", batch.front()->kernel().name(),
                     "' was not resolved by the cpu backend"));
  }
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
  // A checked result bound for a caller's region is computed beside it
  // and copied in once it passed: the caller never sees a result (nor the
  // input C it starts from) before its verdict.
  const bool staged = job.spec().check && job.result_in_region();
  // The result goes somewhere else than the input C (one of them is in a
  // region): it starts as a copy of the input, which the GEMM updates.
  if (job.problem().beta != 0.0f && job.c() != job.c_in() && !staged) {
    std::copy_n(job.c_in(), job.problem().c_elements(), job.c());
  }
  if (!job.spec().check) {
    const absl::Time start = absl::Now();
    Sgemm(job, job.c());
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
    abft::Reduce2DOnHost(abft::InputCPass(s, job.c_in(), scratch.data()));
    c_in.assign(job.c_in(), job.c_in() + s.c_elements());
  }
  for (const abft::Pass& pass :
       abft::OperandPasses(s, job.a(), job.b(), scratch.data())) {
    abft::Reduce2DOnHost(pass);
  }
  JobCheck& check = t.check;
  check.ran = true;
  check.time = absl::Now() - start;
  std::vector<float> beside(staged ? s.c_elements() : 0);
  float* const c = staged ? beside.data() : job.c();
  for (int run = 0; run < 2; ++run) {
    if (s.beta != 0.0f && (run > 0 || staged)) {
      std::copy(c_in.begin(), c_in.end(), c);
    }
    start = absl::Now();
    Sgemm(job, c);
    t.compute = absl::Now() - start;
    if (corrupter_) corrupter_(ResultSite{&job, c, nullptr, run});
    start = absl::Now();
    const abft::Verdict verdict =
        Judge(job, c, c_in.empty() ? nullptr : c_in.data(), scratch);
    check.time += absl::Now() - start;
    if (verdict.ok()) {
      if (staged) std::copy(beside.begin(), beside.end(), job.c());
      check.worst_ratio = verdict.worst_ratio;
      check.unchecked_lines = verdict.unchecked_lines;
      if (run > 0) {
        absl::StrAppend(&check.detail, "; a re-run on ", kKernelName,
                        " passed");
        check.rerun_kernel = kernels_.at(0);
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
  // The job's own C holds the second run's result; a region was never
  // written.
  return absl::DataLossError(
      absl::StrCat("the result failed its check twice, so none is returned: ",
                   check.detail));
}

}  // namespace gemm::server
