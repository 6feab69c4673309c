#include "server/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/abft.h"
#include "common/status_macros.h"
#include "kernels/abft_checksums.h"
#include "kernels/sgemm.h"
#include "server/dispatch_calibration.h"
#include "server/size_class.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

using kernels::CudaStatus;
using kernels::KernelRegistry;
using kernels::MakeSgemmArgs;
using kernels::SgemmArgs;
using kernels::SgemmKernel;

// Batch members start 256-byte aligned, so v5's 16-byte vector loads apply
// to every member and not only the first.
uint64_t PaddedElements(uint64_t elements) {
  return (std::max<uint64_t>(1, elements) + 63) / 64 * 64;
}

// Where one launch's operands sit in its device block: every job's A, then
// every B, then every C, each member padded (PaddedElements); then, for a
// checked batch, every job's check scratch (abft::Layout, in doubles).
struct PackedOperands {
  PackedOperands(const GemmProblem& problem, int jobs, bool check)
      : count(jobs),
        stride_a(PaddedElements(problem.a_elements())),
        stride_b(PaddedElements(problem.b_elements())),
        stride_c(PaddedElements(problem.c_elements())),
        stride_scratch(check ? (abft::Layout(problem).slots() + 31) / 32 * 32
                             : 0) {}
  uint64_t bytes() const {
    return 4 * count * (stride_a + stride_b + stride_c) +
           8 * count * stride_scratch;
  }
  void Place(void* block) {
    a = static_cast<float*>(block);
    b = a + count * stride_a;
    c = b + count * stride_b;
    // 256-byte aligned: every float stride is a multiple of 64.
    scratch = stride_scratch == 0
                  ? nullptr
                  : reinterpret_cast<double*>(c + count * stride_c);
  }
  bool checked() const { return stride_scratch != 0; }

  int count;
  uint64_t stride_a, stride_b, stride_c;  // in floats
  uint64_t stride_scratch;                // in doubles; 0 when unchecked
  float* a = nullptr;
  float* b = nullptr;
  float* c = nullptr;
  double* scratch = nullptr;
};

// The jobs of one launch: batch[begin, begin + count).
struct Chunk {
  const Batch& batch;
  size_t begin;
  int count;
  GemmJob& job(int i) const { return *batch[begin + i]; }
};

// Enqueues A, B and (when beta is not 0) C of every job into `packed`.
absl::Status CopyOperandsIn(const Chunk& chunk, const GemmProblem& problem,
                            const PackedOperands& packed, cudaStream_t st) {
  for (int i = 0; i < chunk.count; ++i) {
    GemmJob& job = chunk.job(i);
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(packed.a + i * packed.stride_a, job.a(),
                        4 * problem.a_elements(), cudaMemcpyHostToDevice, st),
        "H2D of A"));
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(packed.b + i * packed.stride_b, job.b(),
                        4 * problem.b_elements(), cudaMemcpyHostToDevice, st),
        "H2D of B"));
    if (problem.beta != 0.0f) {
      RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(packed.c + i * packed.stride_c, job.c(),
                          4 * problem.c_elements(), cudaMemcpyHostToDevice, st),
          "H2D of C"));
    }
  }
  return absl::OkStatus();
}

// Enqueues the whole chunk as one (batched) launch.
absl::Status LaunchPacked(const SgemmKernel& kernel, const GemmProblem& problem,
                          const PackedOperands& packed, cudaStream_t st) {
  SgemmArgs args = MakeSgemmArgs(problem, packed.a, packed.b, packed.c);
  args.batch_count = packed.count;
  args.stride_a = static_cast<int64_t>(packed.stride_a);
  args.stride_b = static_cast<int64_t>(packed.stride_b);
  args.stride_c = static_cast<int64_t>(packed.stride_c);
  return kernel.Launch(args, st);
}

// Enqueues every job's C back into its host storage, except those whose
// `skip` is set (may be null).
absl::Status CopyResultsOut(const Chunk& chunk, const GemmProblem& problem,
                            const PackedOperands& packed, cudaStream_t st,
                            const std::vector<bool>* skip = nullptr) {
  for (int i = 0; i < chunk.count; ++i) {
    if (skip != nullptr && (*skip)[i]) continue;
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(chunk.job(i).c(), packed.c + i * packed.stride_c,
                        4 * problem.c_elements(), cudaMemcpyDeviceToHost, st),
        "D2H of C"));
  }
  return absl::OkStatus();
}

// The stream's events, by what they mark (CudaDevice::Stream::events).
enum Event {
  kStart = 0,
  kCopiedIn = 1,
  kComputed = 2,
  kCopiedOut = 3,
  kPredicted = 4,  // checked batches only, from here on; on the side stream
  kJudged = 5,
  kCopyingOut = 6,
  kPrepared = 7,
};

// Waits for the last event and gives every job of the chunk its times:
// h2d, compute (the whole launch) and d2h; and for a checked chunk the time
// the check added to the batch's path (zeroing its scratch and summing the
// input C before the kernel; after it, waiting for the predictions that ran
// beside the kernel, C's sums and the verdicts), added to what earlier runs
// took.
absl::Status WaitAndRecordTimings(const Chunk& chunk, const CudaDevice& device,
                                  const CudaDevice::Stream& stream,
                                  bool checked) {
  const cudaEvent_t* ev = stream.events;
  RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(ev[kCopiedOut]),
                             absl::StrCat(device.label(), ": batch")));
  auto elapsed = [ev](Event from, Event to) -> absl::StatusOr<absl::Duration> {
    float ms = 0;
    RETURN_IF_ERROR(CudaStatus(cudaEventElapsedTime(&ms, ev[from], ev[to]),
                               "cudaEventElapsedTime"));
    return absl::Microseconds(1000.0 * ms);
  };
  ASSIGN_OR_RETURN(const absl::Duration h2d, elapsed(kStart, kCopiedIn));
  absl::Duration compute, d2h, check;
  if (!checked) {
    ASSIGN_OR_RETURN(compute, elapsed(kCopiedIn, kComputed));
    ASSIGN_OR_RETURN(d2h, elapsed(kComputed, kCopiedOut));
  } else {
    ASSIGN_OR_RETURN(compute, elapsed(kPrepared, kComputed));
    ASSIGN_OR_RETURN(d2h, elapsed(kCopyingOut, kCopiedOut));
    ASSIGN_OR_RETURN(const absl::Duration before,
                     elapsed(kCopiedIn, kPrepared));
    ASSIGN_OR_RETURN(const absl::Duration after, elapsed(kComputed, kJudged));
    check = before + after;
  }
  for (int i = 0; i < chunk.count; ++i) {
    JobTiming& t = chunk.job(i).timing();
    t.h2d = h2d;
    t.compute = compute;
    t.d2h = d2h;
    t.device = device.label();
    if (checked) {
      t.check.ran = true;
      t.check.time += check;
    }
  }
  return absl::OkStatus();
}

// C = beta * C for a job with K = 0 (beta 0: zeros, whatever C held).
void ScaleOnHost(GemmJob& job) {
  const absl::Time start = absl::Now();
  float* c = job.c();
  const uint64_t n = job.problem().c_elements();
  const float beta = job.problem().beta;
  if (beta == 0.0f) {
    std::fill(c, c + n, 0.0f);
  } else {
    for (uint64_t i = 0; i < n; ++i) c[i] *= beta;
  }
  JobTiming& t = job.timing();
  t.h2d = t.d2h = absl::ZeroDuration();
  t.compute = absl::Now() - start;
  t.device = "host (k = 0)";
}

absl::Status Record(cudaEvent_t event, cudaStream_t st) {
  return CudaStatus(cudaEventRecord(event, st), "cudaEventRecord");
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
  executor->pinned_ = std::make_unique<PinnedHostPool>(
      options.pinned_cache_bytes, options.max_pinned_block_bytes);
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

  if (options.calibrate) {
    absl::StatusOr<DispatchPolicy> calibrated =
        CalibrateDispatch(*executor->devices_.front(), options);
    if (calibrated.ok()) {
      executor->policy_ = std::move(*calibrated);
    } else {
      spdlog::warn("dispatch calibration failed ({}); auto runs cublas",
                   calibrated.status().ToString());
      executor->policy_ = DispatchPolicy::Fixed("cublas");
    }
  }
  spdlog::info(
      "CUDA backend: {} device(s) ({}), {} stream(s) each; dispatch "
      "table {}",
      executor->devices_.size(), executor->devices_.front()->label(),
      options.streams_per_device, executor->policy_.origin());
  return executor;
}

absl::Status CudaExecutor::PrepareWorkerThread() {
  const SgemmKernel* cublas = KernelRegistry::Global().Find("cublas");
  if (cublas == nullptr) return absl::OkStatus();
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
  use.pinned_cached_bytes = pinned_->cached();
  use.pinned_cache_limit_bytes = pinned_->cache_limit();
  return use;
}

std::vector<std::string> CudaExecutor::kernels() const {
  return KernelRegistry::Global().Names();
}

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
    if (KernelMayServe(Precision::kFp32, precision)) {
      return policy_.Choose(shape);
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
    for (const auto& job : live) ScaleOnHost(*job);
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

namespace {

// Copies a chunk in, runs it and copies it out on `device`'s stream
// `stream_index`, with the chunk's timings; for a checked chunk, checks it
// and returns each job's verdict (the results of failing jobs are not
// copied out when beta is not 0, so their host C still holds the input).
// `corrupter` (tests only) may change each result after the kernel.
absl::StatusOr<std::vector<abft::Verdict>> RunChunk(
    const Chunk& chunk, const SgemmKernel& kernel, PackedOperands& packed,
    CudaDevice& device, size_t stream_index, HostAllocator* pinned,
    const ResultCorrupter& corrupter, int run) {
  const GemmProblem& problem = chunk.batch[chunk.begin]->problem();
  const CudaDevice::Stream& stream = device.stream(stream_index);
  const cudaStream_t st = stream.stream;

  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device.ordinal()), "cudaSetDevice"));
  // Each job's verdict slots, in pinned memory (a checked chunk): declared
  // before the block, so that it goes back after the streams are idle.
  constexpr uint64_t kVerdictBytes = 8 * abft::Layout::kVerdictSlots;
  std::optional<HostBuffer> slots;
  if (packed.checked()) slots.emplace(pinned, chunk.count * kVerdictBytes / 4);
  ASSIGN_OR_RETURN(void* block, device.pool().Allocate(packed.bytes()));
  // Whatever happens below, the streams are idle before the block (and the
  // verdict slots) go back.
  struct FreeBlock {
    DeviceMemoryPool& pool;
    cudaStream_t stream;
    cudaStream_t side;
    void* block;
    uint64_t bytes;
    ~FreeBlock() {
      cudaStreamSynchronize(stream);
      cudaStreamSynchronize(side);
      pool.Free(block, bytes);
    }
  } free_block{device.pool(), st, stream.side, block, packed.bytes()};
  packed.Place(block);

  const cudaEvent_t* ev = stream.events;
  const bool checked = packed.checked();
  kernels::AbftBatch abft_batch;
  if (checked) {
    abft_batch = kernels::AbftBatch{problem,
                                    chunk.count,
                                    packed.a,
                                    static_cast<int64_t>(packed.stride_a),
                                    packed.b,
                                    static_cast<int64_t>(packed.stride_b),
                                    packed.c,
                                    static_cast<int64_t>(packed.stride_c),
                                    packed.scratch,
                                    static_cast<int64_t>(packed.stride_scratch),
                                    InputUnitRoundoff(kernel.precision())};
  }
  RETURN_IF_ERROR(Record(ev[kStart], st));
  RETURN_IF_ERROR(CopyOperandsIn(chunk, problem, packed, st));
  RETURN_IF_ERROR(Record(ev[kCopiedIn], st));
  if (checked) {
    // The predictions read only A and B: they run on the side stream,
    // beside the kernel; the input C is summed before the kernel
    // overwrites it.
    RETURN_IF_ERROR(CudaStatus(kernels::LaunchAbftPrepare(abft_batch, st),
                               "result check (input C)"));
    RETURN_IF_ERROR(Record(ev[kPrepared], st));
    RETURN_IF_ERROR(CudaStatus(cudaStreamWaitEvent(stream.side, ev[kPrepared]),
                               "cudaStreamWaitEvent"));
    RETURN_IF_ERROR(
        CudaStatus(kernels::LaunchAbftPredict(abft_batch, stream.side),
                   "result check (predictions)"));
    RETURN_IF_ERROR(Record(ev[kPredicted], stream.side));
  }
  RETURN_IF_ERROR(LaunchPacked(kernel, problem, packed, st));
  RETURN_IF_ERROR(Record(ev[kComputed], st));
  for (int i = 0; i < chunk.count; ++i) {
    chunk.job(i).timing().precision = kernel.precision();
  }
  if (corrupter) {
    for (int i = 0; i < chunk.count; ++i) {
      corrupter(
          ResultSite{&chunk.job(i), packed.c + i * packed.stride_c, st, run});
    }
  }
  std::vector<abft::Verdict> verdicts;
  if (!checked) {
    RETURN_IF_ERROR(CopyResultsOut(chunk, problem, packed, st));
    RETURN_IF_ERROR(Record(ev[kCopiedOut], st));
    RETURN_IF_ERROR(WaitAndRecordTimings(chunk, device, stream, false));
    return verdicts;
  }
  RETURN_IF_ERROR(CudaStatus(cudaStreamWaitEvent(st, ev[kPredicted]),
                             "cudaStreamWaitEvent"));
  RETURN_IF_ERROR(CudaStatus(kernels::LaunchAbftJudge(abft_batch, st),
                             "result check (verdict)"));
  RETURN_IF_ERROR(Record(ev[kJudged], st));
  RETURN_IF_ERROR(CudaStatus(
      cudaMemcpy2DAsync(slots->data(), kVerdictBytes,
                        packed.scratch + abft::Layout(problem).verdict(),
                        8 * packed.stride_scratch, kVerdictBytes, chunk.count,
                        cudaMemcpyDeviceToHost, st),
      "D2H of the check's verdicts"));
  auto read_verdicts = [&] {
    const double* words = reinterpret_cast<const double*>(slots->data());
    verdicts.clear();
    for (int i = 0; i < chunk.count; ++i) {
      verdicts.push_back(
          abft::VerdictFromSlots(words + i * abft::Layout::kVerdictSlots));
    }
  };
  std::vector<bool> failed(chunk.count, false);
  if (problem.beta != 0.0f) {
    // C comes back only once it passed: a failing job keeps its input C.
    RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(st),
                               absl::StrCat(device.label(), ": batch")));
    read_verdicts();
    for (int i = 0; i < chunk.count; ++i) failed[i] = !verdicts[i].ok();
  }
  RETURN_IF_ERROR(Record(ev[kCopyingOut], st));
  RETURN_IF_ERROR(CopyResultsOut(chunk, problem, packed, st, &failed));
  RETURN_IF_ERROR(Record(ev[kCopiedOut], st));
  RETURN_IF_ERROR(WaitAndRecordTimings(chunk, device, stream, true));
  read_verdicts();
  return verdicts;
}

// What re-runs a job whose result failed its check on `first`: cuBLAS, or
// when cuBLAS gave the bad result, the first own kernel that takes the
// shape.
const SgemmKernel* ReRunKernel(const std::string& first,
                               const GemmProblem& problem) {
  // Any 256-byte-aligned addresses: CanImplement looks at alignment only.
  float* aligned = reinterpret_cast<float*>(uintptr_t{256});
  const SgemmArgs args = MakeSgemmArgs(problem, aligned, aligned, aligned);
  for (const char* name : {"cublas", "v7", "v6", "v5", "v0"}) {
    if (first == name) continue;
    const SgemmKernel* kernel = KernelRegistry::Global().Find(name);
    if (kernel != nullptr && kernel->CanImplement(args).ok()) return kernel;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::vector<CudaExecutor::FailedCheck>>
CudaExecutor::ExecuteChunk(const Batch& batch, size_t begin, size_t end,
                           const Run& run) {
  const GemmProblem& problem = batch[begin]->problem();
  const std::string& kernel_name = batch[begin]->kernel();
  const SgemmKernel* kernel = run.kernel != nullptr
                                  ? run.kernel
                                  : KernelRegistry::Global().Find(kernel_name);
  if (kernel == nullptr) {
    return absl::InternalError(
        absl::StrCat("kernel '", kernel_name, "' is not registered"));
  }
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
        check.rerun_kernel = std::string(kernel->name());
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
  if (run.kernel == nullptr) {
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
