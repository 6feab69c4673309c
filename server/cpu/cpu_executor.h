// CpuExecutor: runs GEMMs on the host with OpenBLAS's cblas_sgemm.
//
// This is the backend wherever there is no GPU. Its only kernel is "cpu";
// "auto" resolves to it. OpenBLAS parallelizes each GEMM over its own
// threads, so one GEMM runs at a time; GEMMs under 512^3 run on one thread
// (helper threads spin after each GEMM they join, taking cores from gRPC
// on a small host).
//
// Light jobs (IsLight: under 512^3, C of 1 MiB at most) run whole. Heavy
// ones run tile by tile of C, each tile in steps over K, each step a GEMM
// of its own. GEMMs take turns at OpenBLAS in the order they ask, and a
// heavy job asks again for each step: a light job that arrives during a
// step runs before the next one, and light jobs back to back from several
// workers cannot hold a heavy job's next step back for longer than the
// light jobs ahead of it; a heavy C
// that is not read is zeroed first, outside OpenBLAS's turns. K = 0 (C = beta *
// C) needs no OpenBLAS and takes no turn. With a light worker in front
// (BatchScheduler::Options::light_workers), one client's 4096^3 GEMM, or
// its K = 0 job asking for a C of 64 MiB, no longer keeps another client's
// 64^3 job waiting for the whole of it.
//
// A job with JobSpec::check is checked (common/abft.h) on the host: the
// operands' sums before the GEMM, C's after it. A result that fails runs
// once more (OpenBLAS again: the CPU backend has no other kernel, so a
// transient fault is what a re-run can catch) from the input C kept aside;
// if that fails too, the job ends with DATA_LOSS and the others of the
// batch go on.
//
// Thread-safety: thread-safe; concurrent Execute() calls take turns at
// OpenBLAS, a step of a heavy job or a light job at a time.
//
//   ASSIGN_OR_RETURN(auto executor, CpuExecutor::Create({.threads = 4}));
//   RETURN_IF_ERROR(executor->Execute(batch));
#ifndef GEMM_SERVER_CPU_CPU_EXECUTOR_H_
#define GEMM_SERVER_CPU_CPU_EXECUTOR_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/core/executor.h"
#include "server/cpu/turn_queue.h"

namespace gemm::server {

class CpuExecutor final : public Executor {
 public:
  struct Options {
    // OpenBLAS threads per GEMM; 0 keeps OpenBLAS's own default (all cores,
    // or OPENBLAS_NUM_THREADS).
    int threads = 0;
  };

  static absl::StatusOr<std::unique_ptr<CpuExecutor>> Create(
      const Options& options);

  absl::string_view backend() const override { return "cpu"; }
  std::vector<DeviceDescription> devices() const override;
  std::vector<std::string> kernels() const override;
  std::vector<KernelDescription> kernel_details() const override;
  // Float32, and the float32-accurate Tensor Core mode, which float32
  // serves; UNIMPLEMENTED for TF32 and BF16.
  absl::StatusOr<KernelHandle> ResolveKernel(
      const GemmProblem& problem, absl::string_view requested,
      Precision precision = Precision::kFp32) const override;
  absl::Status Execute(const Batch& batch) override;
  void SetResultCorrupterForTesting(ResultCorrupter corrupter) override {
    corrupter_ = std::move(corrupter);
  }

  // The name of the one real kernel of this backend.
  static constexpr char kKernelName[] = "cpu";

  // Whether a job runs whole (see above); the others run in tiles.
  static bool IsLight(const GemmProblem& problem);

 private:
  CpuExecutor(const Options& options, int threads)
      : options_(options), full_threads_(threads), current_threads_(threads) {}

  // One job: its GEMM, and its check when it asks for one. Fails only
  // with DATA_LOSS (both runs failed the check).
  absl::Status Run(GemmJob& job);
  // The job's GEMM into `c` (which holds the input C when beta is not 0):
  // whole when it is light, else tile by tile, step by step, asking for a
  // turn for each step.
  void Sgemm(GemmJob& job, float* c);
  // A range of rows, columns or K.
  struct Span {
    uint32_t start = 0;
    uint32_t size = 0;
  };
  // cblas_sgemm on `rows` and `cols` of `c` over `depth` of K
  // (C = alpha * A B + beta * C for the first, C += alpha * A B after), on
  // one thread or all (kThreadedMinVolume).
  void SgemmTile(GemmJob& job, float* c, Span rows, Span cols, Span depth)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const KernelTable kernels_{
      {{kKernelName, Precision::kFp32, "OpenBLAS cblas_sgemm on the host"}}};
  // OpenBLAS threads for large GEMMs, and those set now (one for small
  // ones). OpenBLAS's count is process-wide: it changes under mu_, and two
  // executors in one process (tests) may each run with the other's count,
  // which costs speed only.
  const int full_threads_;
  int current_threads_ ABSL_GUARDED_BY(mu_);
  // Held for each OpenBLAS call: one GEMM (a light job, or a step of a
  // heavy one) at a time, taken in a Turn.
  absl::Mutex mu_;
  // Turns at mu_, in the order asked for (a light job, or each step).
  TurnQueue turns_;
  ResultCorrupter corrupter_;
  std::atomic<uint64_t> check_mismatches_{0};
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CPU_CPU_EXECUTOR_H_
