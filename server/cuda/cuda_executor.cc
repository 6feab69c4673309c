#include "server/cuda/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/abft.h"
#include "common/status_macros.h"
#include "kernels/sgemm.h"
#include "kernels/sgemm_launchers.h"
#include "server/cuda/chunk_run.h"
#include "server/cuda/dispatch_calibration.h"
#include "server/cuda/size_class.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

using kernels::CudaStatus;
using kernels::KernelRegistry;
using kernels::MakeSgemmArgs;
using kernels::SgemmArgs;
using kernels::SgemmKernel;

// C = beta * C for a job with K = 0 (beta 0: zeros, whatever C held), on
// the host; through a host copy when the input C or the result is in
// device memory (a CUDA IPC region).
absl::Status ScaleOnHost(GemmJob& job) {
  const absl::Time start = absl::Now();
  const uint64_t n = job.problem().c_elements();
  const float beta = job.problem().beta;
  float* c = job.c();
  std::vector<float> staged;
  if (c == nullptr) {
    staged.resize(n);
    c = staged.data();
  }
  if (beta != 0.0f) {
    if (job.c_region().device != nullptr) {
      RETURN_IF_ERROR(CudaStatus(
          cudaMemcpy(c, job.c_region().device, 4 * n, cudaMemcpyDefault),
          "copy of C"));
    } else if (job.c_in() != c) {
      std::copy_n(job.c_in(), n, c);
    }
  }
  ScaleByBeta(c, n, beta);
  if (!staged.empty()) {
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpy(job.result_region().device, c, 4 * n, cudaMemcpyDefault),
        "copy of the result"));
  }
  JobTiming& t = job.timing();
  t.h2d = t.d2h = absl::ZeroDuration();
  t.compute = absl::Now() - start;
  t.device = "host (k = 0)";
  return absl::OkStatus();
}

}  // namespace

int CudaExecutor::VisibleDeviceCount(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (why != nullptr) {
      *why = absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorString(err));
    }
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "no CUDA device is visible";
  return count;
}

uint64_t CudaExecutor::DeviceBytes(const GemmProblem& shape) {
  return SizeClass(PackedOperands(shape, 1, /*check=*/true).bytes());
}

CudaExecutor::CudaExecutor(const Options& options)
    : options_(options), policy_(DispatchPolicy::Fixed("cublas")) {}

// The devices wait for their streams before they let go of them; the
// pinned pool goes last.
CudaExecutor::~CudaExecutor() = default;

absl::StatusOr<std::unique_ptr<CudaExecutor>> CudaExecutor::Create(
    const Options& options) {
  std::string why;
  const int visible = VisibleDeviceCount(&why);
  if (visible == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the CUDA backend needs a GPU: ", why));
  }
  if (options.streams_per_device < 1) {
    return absl::InvalidArgumentError("streams_per_device must be at least 1");
  }
  std::vector<int> ordinals = options.devices;
  if (ordinals.empty()) {
    for (int i = 0; i < visible; ++i) ordinals.push_back(i);
  }
  for (size_t i = 0; i < ordinals.size(); ++i) {
    if (ordinals[i] < 0 || ordinals[i] >= visible) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "devices: %d is not a visible CUDA device (%d visible)", ordinals[i],
          visible));
    }
    if (std::count(ordinals.begin(), ordinals.end(), ordinals[i]) > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("devices: ", ordinals[i], " listed twice"));
    }
  }
  std::unique_ptr<CudaExecutor> executor(new CudaExecutor(options));
  executor->pinned_ = PinnedHostPool::Create(options.pinned_pool_bytes,
                                             options.max_pinned_block_bytes);
  for (int ordinal : ordinals) {
    ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device,
                     CudaDevice::Create(ordinal, options));
    const uint64_t budget = device->pool().budget();
    executor->smallest_budget_ =
        executor->devices_.empty()
            ? budget
            : std::min(executor->smallest_budget_, budget);
    executor->devices_.push_back(std::move(device));
  }
  executor->slots_ = std::make_unique<StreamSlots>(executor->devices_.size(),
                                                   options.streams_per_device);

  // The kernels this backend offers, and auto's candidates among them.
  const std::vector<std::string> names =
      KernelsEveryDeviceRuns(executor->devices_);
  std::vector<KernelDescription> offered;
  for (const std::string& name : names) {
    const SgemmKernel* kernel = KernelRegistry::Global().Find(name);
    executor->sgemm_.push_back(kernel);
    offered.push_back(KernelDescription{name, kernel->precision(),
                                        std::string(kernel->description())});
  }
  executor->kernels_ = std::make_unique<KernelTable>(std::move(offered));
  for (const char* name : {"cublas", "v7", "v6", "v5", "v0"}) {
    const KernelHandle kernel = executor->kernels_->Find(name);
    if (kernel.valid()) executor->rerun_order_.push_back(kernel);
  }
  if (options.calibrate) {
    const bool with_wgmma = executor->kernels_->Find("v12").valid();
    absl::StatusOr<DispatchPolicy> calibrated =
        CalibrateDispatch(*executor->devices_.front(), options, with_wgmma);
    if (calibrated.ok()) {
      executor->policy_ = std::move(*calibrated);
    } else {
      spdlog::warn("dispatch calibration failed ({}); auto runs cublas",
                   calibrated.status().ToString());
      executor->policy_ = DispatchPolicy::Fixed("cublas");
    }
  }
  executor->auto_allowed_ = AllowedByPrecision(executor->policy_.kernels());
  if (options.calibrate && options.max_tuned_shapes > 0) {
    std::vector<std::string> candidates = TunerCandidates(names);
    executor->tuner_allowed_ = AllowedByPrecision(candidates);
    executor->tuner_ = std::make_unique<ShapeTuner>(
        std::move(candidates), ShapeMeasure(*executor->devices_.front()),
        ShapeTuner::Options{.max_shapes = options.max_tuned_shapes});
  }
  spdlog::info(
      "CUDA backend: {} device(s) ({}), {} stream(s) each; dispatch "
      "table {}",
      executor->devices_.size(), executor->devices_.front()->label(),
      options.streams_per_device, executor->policy_.origin());
  return executor;
}

absl::Status CudaExecutor::PrepareWorkerThread() {
  const int at = kernels_->IndexOf(kernels_->Find("cublas"));
  if (at < 0) return absl::OkStatus();
  const SgemmKernel* cublas = sgemm_[at];
  for (const std::unique_ptr<CudaDevice>& device : devices_) {
    RETURN_IF_ERROR(
        CudaStatus(cudaSetDevice(device->ordinal()), "cudaSetDevice"));
    constexpr uint64_t kBytes = 3 * sizeof(float);
    ASSIGN_OR_RETURN(void* block, device->pool().Allocate(kBytes));
    float* a = static_cast<float*>(block);
    const cudaStream_t stream = device->stream(0).stream;
    const SgemmArgs args = MakeSgemmArgs(GemmProblem{1, 1, 1}, a, a + 1, a + 2);
    absl::Status status = CudaStatus(cudaMemsetAsync(block, 0, kBytes, stream),
                                     "cudaMemsetAsync");
    if (status.ok()) status = cublas->Launch(args, stream);
    absl::Status synced =
        CudaStatus(cudaStreamSynchronize(stream), "warm-up synchronize");
    device->pool().Free(block, kBytes);
    RETURN_IF_ERROR(status);
    RETURN_IF_ERROR(synced);
  }
  return absl::OkStatus();
}

std::vector<DeviceDescription> CudaExecutor::devices() const {
  std::vector<DeviceDescription> out;
  for (const auto& device : devices_) {
    DeviceDescription d;
    d.id = absl::StrCat("cuda:", device->ordinal());
    d.name = device->name();
    d.memory_bytes = device->memory_bytes();
    d.compute_capability = device->compute_capability();
    d.failure = device->failure();
    d.check_mismatches = device->check_mismatches();
    out.push_back(std::move(d));
  }
  return out;
}

bool CudaExecutor::serviceable() const { return slots_->in_service() > 0; }

MemoryUse CudaExecutor::memory_use() const {
  MemoryUse use;
  for (const auto& device : devices_) {
    MemoryUse::Device d;
    d.id = absl::StrCat("cuda:", device->ordinal());
    d.in_use_bytes = device->pool().in_use();
    d.cached_bytes = device->pool().cached();
    d.budget_bytes = device->pool().budget();
    use.devices.push_back(std::move(d));
  }
  use.pinned_in_use_bytes = pinned_->in_use();
  use.pinned_pool_bytes = pinned_->size();
  use.pinned_pageable_blocks = pinned_->pageable_blocks();
  return use;
}

HostAllocator* CudaExecutor::host_allocator() { return pinned_.get(); }

int CudaExecutor::concurrency() const {
  return static_cast<int>(devices_.size()) * options_.streams_per_device;
}

absl::Status CudaExecutor::Execute(const Batch& batch) {
  // Jobs cancelled since they were batched end now and take no device
  // memory; their host blocks go back to the pool when their RPC lets go.
  Batch live;
  for (const auto& job : batch) {
    if (job->IsCancelled()) {
      job->Finish(absl::CancelledError("job cancelled by the caller"));
    } else {
      live.push_back(job);
    }
  }
  if (live.empty()) return absl::OkStatus();
  // K = 0: C = beta * C, nothing for the GPU to do (a batch has one shape).
  // Done on the host, so that a job whose result dwarfs its request (a
  // 23170^2 result from a 76-byte request) takes no device memory and no
  // copy engine from the other jobs.
  if (live.front()->problem().k == 0) {
    for (const auto& job : live) {
      absl::Status scaled = ScaleOnHost(*job);
      if (!scaled.ok()) job->Finish(std::move(scaled));
    }
    return absl::OkStatus();
  }
  // Split a batch too large for the memory budget into launches that fit.
  const uint64_t per_job = DeviceBytes(live.front()->problem());
  const size_t per_launch =
      std::max<uint64_t>(1, smallest_budget_ / 2 / per_job);
  std::vector<FailedCheck> failed;
  for (size_t begin = 0; begin < live.size(); begin += per_launch) {
    ASSIGN_OR_RETURN(
        std::vector<FailedCheck> chunk_failed,
        ExecuteChunk(live, begin, std::min(live.size(), begin + per_launch),
                     Run()));
    failed.insert(failed.end(), chunk_failed.begin(), chunk_failed.end());
  }
  for (const FailedCheck& f : failed) ReRun(live[f.job], f.device);
  return absl::OkStatus();
}

// cuBLAS, or when cuBLAS gave the bad result, the first own kernel that
// takes the shape.
KernelHandle CudaExecutor::ReRunKernel(const KernelHandle& first,
                                       const GemmProblem& problem) const {
  // Any 256-byte-aligned addresses: CanImplement looks at alignment only.
  float* aligned = reinterpret_cast<float*>(uintptr_t{256});
  const SgemmArgs args = MakeSgemmArgs(problem, aligned, aligned, aligned);
  for (const KernelHandle& kernel : rerun_order_) {
    if (kernel == first) continue;
    if (sgemm_[kernels_->IndexOf(kernel)]->CanImplement(args).ok()) {
      return kernel;
    }
  }
  return KernelHandle();
}

absl::StatusOr<std::vector<CudaExecutor::FailedCheck>>
CudaExecutor::ExecuteChunk(const Batch& batch, size_t begin, size_t end,
                           const Run& run) {
  const GemmProblem& problem = batch[begin]->problem();
  const KernelHandle handle =
      run.kernel.valid() ? run.kernel : batch[begin]->kernel();
  const int index = kernels_->IndexOf(handle);
  if (index < 0) {
    return absl::InternalError(absl::StrCat(
        "kernel '", handle.name(), "' was not resolved by the cuda backend"));
  }
  const SgemmKernel* kernel = sgemm_[index];
  const Chunk chunk{batch, begin, static_cast<int>(end - begin)};
  PackedOperands packed(problem, chunk.count, batch[begin]->spec().check);

  // A stream on the least-loaded device, held until the chunk is done.
  ASSIGN_OR_RETURN(
      const StreamSlots::Slot slot,
      run.avoid_device == SIZE_MAX
          ? slots_->Acquire(packed.bytes())
          : slots_->AcquireAvoiding(packed.bytes(), run.avoid_device));
  struct ReleaseSlot {
    StreamSlots* slots;
    StreamSlots::Slot slot;
    uint64_t bytes;
    ~ReleaseSlot() { slots->Release(slot, bytes); }
  } release_slot{slots_.get(), slot, packed.bytes()};
  CudaDevice& device = *devices_[slot.device];
  // Where the chunk ran, also when it fails (the metrics' device label).
  for (int i = 0; i < chunk.count; ++i) {
    batch[begin + i]->timing().device = device.label();
  }
  absl::StatusOr<std::vector<abft::Verdict>> verdicts =
      RunChunk(chunk, *kernel, packed, device, slot.stream, pinned_.get(),
               corrupter_, run.number);
  absl::Status status = verdicts.status();
  if (!status.ok() && device.failure().empty()) {
    // Was it this batch, or the device? A sticky error answers every call
    // on the device's context from now on.
    cudaSetDevice(device.ordinal());
    const cudaError_t probe = cudaDeviceSynchronize();
    if (IsStickyCudaError(probe)) {
      const std::string why = absl::StrCat(cudaGetErrorName(probe), ": ",
                                           cudaGetErrorString(probe));
      device.MarkFailed(why);
      slots_->Disable(slot.device);
      spdlog::critical(
          "{} failed ({}); it is out of service, {} device(s) left",
          device.label(), why, slots_->in_service());
    }
  }
  if (!status.ok() && !device.failure().empty()) {
    return absl::InternalError(absl::StrCat(
        "device ", device.label(), " failed (", device.failure(),
        "); the batch's results are discarded and the device is out of "
        "service"));
  }
  RETURN_IF_ERROR(status);
  std::vector<FailedCheck> failed;
  for (int i = 0; i < static_cast<int>(verdicts->size()); ++i) {
    const abft::Verdict& v = (*verdicts)[i];
    JobCheck& check = batch[begin + i]->timing().check;
    if (v.ok()) {
      check.worst_ratio = v.worst_ratio;
      check.unchecked_lines = v.unchecked_lines;
      if (run.number > 0) {
        check.rerun_kernel = handle;
        absl::StrAppend(&check.detail, "; a re-run on ",
                        std::string(kernel->name()), " on ", device.label(),
                        " passed");
      }
      continue;
    }
    device.CountCheckMismatch();
    ++check.mismatches;
    const std::string what = absl::StrFormat(
        "run %d on %s on %s failed its check: %d of %d rows and columns off, "
        "worst %s at %.3g times its tolerance",
        run.number + 1, std::string(kernel->name()), device.label(),
        v.bad_lines, uint64_t{problem.m} + problem.n,
        abft::LineName(problem, v.worst_line), v.worst_ratio);
    spdlog::error("job {}: {}", problem.ToString(), what);
    absl::StrAppend(&check.detail, check.detail.empty() ? "" : "; ", what);
    failed.push_back(FailedCheck{begin + i, slot.device});
  }
  return failed;
}

void CudaExecutor::ReRun(const std::shared_ptr<GemmJob>& job,
                         size_t failed_device) {
  JobCheck& check = job->timing().check;
  if (check.mismatches > 1) {
    job->Finish(absl::DataLossError(
        absl::StrCat("the result failed its check twice, so none is returned: ",
                     check.detail)));
    return;
  }
  Run run;
  run.kernel = ReRunKernel(job->kernel(), job->problem());
  run.avoid_device = failed_device;
  run.number = 1;
  if (!run.kernel.valid()) {
    job->Finish(absl::DataLossError(absl::StrCat(
        "the result failed its check and no other kernel can re-run it: ",
        check.detail)));
    return;
  }
  // The re-run's times replace the first run's; it runs alone.
  job->timing().batch_size = 1;
  const Batch alone = {job};
  absl::StatusOr<std::vector<FailedCheck>> failed =
      ExecuteChunk(alone, 0, 1, run);
  if (!failed.ok()) {
    job->Finish(failed.status());
  } else if (!failed->empty()) {
    job->Finish(absl::DataLossError(
        absl::StrCat("the result failed its check twice, so none is returned: ",
                     check.detail)));
  }
}

}  // namespace gemm::server
