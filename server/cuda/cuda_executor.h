// CudaExecutor: runs batches of GEMM jobs on one or more CUDA devices.
//
// Each device (cuda_device.h) has a pool of streams, a caching device-memory
// pool with a byte budget (device_memory_pool.h), and CUDA events per stream
// for the timings. All devices share one pinned host pool
// (pinned_host_pool.h), which the service uses for the jobs' A, B and C
// (host_allocator()), so request bytes are copied once into page-locked
// memory and the copy engines read them from there. A batch of same-shape
// jobs is packed contiguously on the device and runs as ONE batched launch
// (cublasSgemmStridedBatched, or the chapter's kernels with batch_count).
// Execute() picks the least-loaded device with a free stream
// (stream_slots.h); several
// scheduler workers calling Execute() at once overlap one batch's copies
// with another's kernel. Nothing on the hot path calls cudaMalloc or
// cudaHostAlloc once the pools hold blocks of the sizes in use.
//
// "auto" resolves through a DispatchPolicy measured at start (or loaded
// from Options::dispatch_cache; dispatch_calibration.h). Jobs too large for a
// device's memory budget are refused with RESOURCE_EXHAUSTED at admission
// (ResolveKernel); an allocation that fails later is RESOURCE_EXHAUSTED, never
// a crash; CUDA errors are INTERNAL. A sticky error (a kernel fault, an
// uncorrectable ECC error, a lost device: the device's context is unusable)
// takes the device out of service: its batch fails with INTERNAL naming the
// device and the error, no batch goes there again, the other devices keep
// serving, and with none left serviceable() turns false and batches fail
// with UNAVAILABLE. No result is ever taken from a failed device.
//
// A job with JobSpec::check is checked on its device (ABFT:
// kernels/abft_checksums.h, common/abft.h): the input C's sums before the
// kernel, the predictions from A and B beside it (on the stream's side
// stream: they only read A and B), C's sums and the verdict after it. With beta
// = 0, C comes back with the verdict; with beta
// != 0, C comes back once the verdict passed, so a failing job keeps its
// input C on the host. A job that fails runs again alone on another kernel
// (cuBLAS, or the best own kernel when cuBLAS gave the bad result) and on
// another device when there is one; it ends with DATA_LOSS when that fails
// too. Every failure is logged and counted per device (Info, metrics).
//
// Thread-safety: thread-safe.
//
//   ASSIGN_OR_RETURN(auto executor, CudaExecutor::Create(options));
//   service_options.host_allocator = executor->host_allocator();
//   scheduler_options.num_workers = executor->concurrency();
#ifndef GEMM_SERVER_CUDA_CUDA_EXECUTOR_H_
#define GEMM_SERVER_CUDA_CUDA_EXECUTOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/sgemm.h"
#include "server/core/executor.h"
#include "server/cuda/cuda_device.h"
#include "server/cuda/cuda_executor_options.h"
#include "server/cuda/dispatch_policy.h"
#include "server/cuda/pinned_host_pool.h"
#include "server/cuda/shape_tuner.h"
#include "server/cuda/stream_slots.h"

namespace gemm::server {

class CudaExecutor final : public Executor {
 public:
  using Options = CudaExecutorOptions;

  // Visible CUDA devices; 0 with the reason in `why` when there are none
  // (no driver, no GPU, CUDA_VISIBLE_DEVICES empty).
  static int VisibleDeviceCount(std::string* why);

  static absl::StatusOr<std::unique_ptr<CudaExecutor>> Create(
      const Options& options);
  ~CudaExecutor() override;

  absl::string_view backend() const override { return "cuda"; }
  std::vector<DeviceDescription> devices() const override;
  std::vector<std::string> kernels() const override;
  std::vector<KernelDescription> kernel_details() const override;
  // "auto" chooses by shape among the candidates the precision allows:
  // the float32 kernels for float32, those and the 3xTF32 ones for the
  // float32-accurate Tensor Core mode; for TF32 and BF16 cuBLAS's Tensor
  // Core entry. A shape the tuner measured (shape_tuner.h) gets its
  // fastest kernel; any other the calibrated table's (DispatchPolicy), and
  // is queued for measuring. A named kernel must be one of kernels().
  absl::StatusOr<KernelHandle> ResolveKernel(
      const GemmProblem& problem, absl::string_view requested,
      Precision precision = Precision::kFp32) const override;
  absl::Status Execute(const Batch& batch) override;
  // The kernel of kernels() called `name`, whatever its precision; no
  // kernel when there is none (tests and benchmarks build jobs with it).
  KernelHandle FindKernel(absl::string_view name) const {
    return kernels_->Find(name);
  }

  // Pinned host storage for jobs; lives as long as the executor.
  HostAllocator* host_allocator();
  // Creates this thread's cuBLAS handle on every device (a tiny cuBLAS
  // launch each), so that the first job a worker runs does not pay for it.
  absl::Status PrepareWorkerThread() override;
  MemoryUse memory_use() const override;
  bool serviceable() const override;
  // Batches that can usefully run at once: devices x streams per device.
  int concurrency() const;
  const DispatchPolicy& dispatch_policy() const { return policy_; }
  // The shape tuner; null without calibration or with max_tuned_shapes 0.
  ShapeTuner* shape_tuner() const { return tuner_.get(); }
  // Device memory bytes a job of `problem` needs (its packed operands and
  // its check's scratch).
  static uint64_t DeviceBytes(const GemmProblem& problem);
  void SetResultCorrupterForTesting(ResultCorrupter corrupter) override {
    corrupter_ = std::move(corrupter);
  }
  // Regions (cuda_executor_regions.cc): system regions are registered
  // with the driver (cudaHostRegister, portable), CUDA IPC handles opened
  // on the device whose UUID they name.
  absl::StatusOr<bool> PinHostRegion(void* base, uint64_t bytes,
                                     bool read_only) override;
  void UnpinHostRegion(void* base) override;
  absl::StatusOr<IpcMemory> OpenIpcRegion(absl::string_view handle,
                                          absl::string_view device_uuid,
                                          uint64_t bytes) override;
  void CloseIpcRegion(const IpcMemory& memory) override;
  // A device's UUID as nvidia-smi prints it ("GPU-8c3f0b1e-...").
  static std::string DeviceUuid(int ordinal);

 private:
  // How ExecuteChunk runs: the first run of a batch, or the re-run of one
  // job whose result failed its check (another kernel, another device).
  struct Run {
    KernelHandle kernel;             // no kernel: the jobs' own
    size_t avoid_device = SIZE_MAX;  // SIZE_MAX: none
    int number = 0;                  // 0 first, 1 re-run
  };

  explicit CudaExecutor(const Options& options);
  // Runs jobs [begin, end) of `batch` as one launch on one device; returns
  // the checked jobs whose result failed its check (their C is not
  // returned: the caller re-runs them).
  struct FailedCheck {
    size_t job;     // index in the batch
    size_t device;  // index in devices_
  };
  absl::StatusOr<std::vector<FailedCheck>> ExecuteChunk(const Batch& batch,
                                                        size_t begin,
                                                        size_t end,
                                                        const Run& run);
  // Runs a job whose result failed its check again, on another kernel and
  // (where there is one) another device; the job ends with DATA_LOSS when
  // that result fails too, or with the re-run's error.
  void ReRun(const std::shared_ptr<GemmJob>& job, size_t failed_device);
  // The first of rerun_order_ other than `first` that takes `problem`; no
  // kernel when none does.
  KernelHandle ReRunKernel(const KernelHandle& first,
                           const GemmProblem& problem) const;

  const Options options_;
  std::unique_ptr<PinnedHostPool> pinned_;
  std::vector<std::unique_ptr<CudaDevice>> devices_;
  std::unique_ptr<StreamSlots> slots_;
  DispatchPolicy policy_;
  // The registry's kernels that every device runs, in its order: the
  // table ResolveKernel hands out handles into, and the kernel objects at
  // the same indices.
  std::unique_ptr<KernelTable> kernels_;
  std::vector<const kernels::SgemmKernel*> sgemm_;
  // What re-runs a job whose result failed its check, in order of
  // preference (cuBLAS, then own kernels; ReRunKernel).
  std::vector<KernelHandle> rerun_order_;
  // Per Precision (its enum value): which of policy_'s kernels a job of
  // that precision allows (KernelMayServe).
  std::vector<std::vector<bool>> auto_allowed_;
  uint64_t smallest_budget_ = 0;
  ResultCorrupter corrupter_;
  // After devices_: it measures on the first device, and stops first.
  std::unique_ptr<ShapeTuner> tuner_;
  std::vector<std::vector<bool>> tuner_allowed_;  // as auto_allowed_
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CUDA_CUDA_EXECUTOR_H_
