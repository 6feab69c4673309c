#include "server/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "kernels/sgemm.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

using kernels::CudaStatus;
using kernels::KernelRegistry;
using kernels::MakeSgemmArgs;
using kernels::SgemmArgs;
using kernels::SgemmKernel;

// The kernels "auto" chooses between.
const std::vector<std::string>& AutoCandidates() {
  static const auto* const candidates =
      new std::vector<std::string>{"v5", "cublas"};
  return *candidates;
}

// Pool size classes: 4 KiB at least, then quarter steps between powers of
// two, so a cached block serves any request within 25% below it.
uint64_t SizeClass(uint64_t bytes) {
  if (bytes <= 4096) return 4096;
  const int e = 63 - __builtin_clzll(bytes - 1);  // 2^e < bytes <= 2^(e+1)
  const uint64_t step = (uint64_t{1} << e) / 4;
  return (bytes + step - 1) / step * step;
}

// Batch members start 256-byte aligned, so v5's 16-byte vector loads apply
// to every member and not only the first.
uint64_t PaddedElements(uint64_t elements) {
  return (std::max<uint64_t>(1, elements) + 63) / 64 * 64;
}

}  // namespace

// Pinned host blocks, cached by size class. Thread-safe.
class CudaExecutor::PinnedPool final : public HostAllocator {
 public:
  explicit PinnedPool(uint64_t cache_limit) : cache_limit_(cache_limit) {}
  ~PinnedPool() override { Trim(); }

  void* Allocate(uint64_t bytes) override {
    const uint64_t size = SizeClass(bytes);
    {
      absl::MutexLock lock(&mu_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        void* block = it->second.back();
        it->second.pop_back();
        cached_ -= size;
        return block;
      }
    }
    void* block = nullptr;
    if (cudaHostAlloc(&block, size, cudaHostAllocPortable) != cudaSuccess) {
      cudaGetLastError();
      Trim();
      if (cudaHostAlloc(&block, size, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        spdlog::warn(
            "pinned pool: cudaHostAlloc of {} bytes failed; the job "
            "uses pageable memory",
            size);
        return nullptr;
      }
    }
    return block;
  }

  void Free(void* block, uint64_t bytes) override {
    const uint64_t size = SizeClass(bytes);
    {
      absl::MutexLock lock(&mu_);
      if (cached_ + size <= cache_limit_) {
        free_[size].push_back(block);
        cached_ += size;
        return;
      }
    }
    cudaFreeHost(block);
  }

  // Returns every cached block to the driver.
  void Trim() {
    std::vector<void*> blocks;
    {
      absl::MutexLock lock(&mu_);
      for (auto& [size, list] : free_) {
        blocks.insert(blocks.end(), list.begin(), list.end());
      }
      free_.clear();
      cached_ = 0;
    }
    for (void* block : blocks) cudaFreeHost(block);
  }

 private:
  const uint64_t cache_limit_;
  absl::Mutex mu_;
  std::map<uint64_t, std::vector<void*>> free_ ABSL_GUARDED_BY(mu_);
  uint64_t cached_ ABSL_GUARDED_BY(mu_) = 0;
};

// One GPU: its streams (with their events) and its memory pool.
struct CudaExecutor::Device {
  struct Stream {
    cudaStream_t stream = nullptr;
    // Recorded before H2D, after H2D, after the kernel, after D2H.
    cudaEvent_t events[4] = {nullptr, nullptr, nullptr, nullptr};
    bool busy = false;
  };

  int ordinal = 0;
  std::string name;
  std::string label;  // "cuda:0 NVIDIA H200"
  uint64_t memory_bytes = 0;
  std::string compute_capability;
  uint64_t budget = 0;

  // Guarded by CudaExecutor's scheduling mutex (slot_mu).
  std::vector<Stream> streams;
  uint64_t load = 0;  // bytes of the batches running here

  // The memory pool.
  absl::Mutex mu;
  uint64_t in_use ABSL_GUARDED_BY(mu) = 0;
  uint64_t cached ABSL_GUARDED_BY(mu) = 0;
  std::map<uint64_t, std::vector<void*>> free ABSL_GUARDED_BY(mu);

  // A block of at least `bytes`, waiting while other batches hold the
  // budget. Call with this device current.
  absl::StatusOr<void*> Allocate(uint64_t bytes) {
    const uint64_t size = SizeClass(bytes);
    if (size > budget) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s: a batch needs %d bytes of device memory, over the device's "
          "budget of %d",
          label, size, budget));
    }
    absl::MutexLock lock(&mu);
    auto fits = [this, size]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return in_use + size <= budget;
    };
    mu.Await(absl::Condition(&fits));
    auto it = free.find(size);
    if (it != free.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      cached -= size;
      in_use += size;
      return block;
    }
    // Make room under the budget from cached blocks of other sizes.
    while (in_use + cached + size > budget && cached > 0) ReleaseOneCached();
    void* block = nullptr;
    cudaError_t err = cudaMalloc(&block, size);
    if (err != cudaSuccess) {
      cudaGetLastError();  // not sticky; clear it
      while (cached > 0) ReleaseOneCached();
      err = cudaMalloc(&block, size);
      if (err != cudaSuccess) {
        cudaGetLastError();
        return absl::ResourceExhaustedError(
            absl::StrFormat("%s: cudaMalloc of %d bytes failed: %s", label,
                            size, cudaGetErrorString(err)));
      }
    }
    in_use += size;
    return block;
  }

  void Free(void* block, uint64_t bytes) {
    const uint64_t size = SizeClass(bytes);
    absl::MutexLock lock(&mu);
    free[size].push_back(block);
    cached += size;
    in_use -= size;
  }

  // Gives the largest cached block back to the driver.
  void ReleaseOneCached() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (auto it = free.rbegin(); it != free.rend(); ++it) {
      if (it->second.empty()) continue;
      cudaFree(it->second.back());
      it->second.pop_back();
      cached -= it->first;
      return;
    }
  }
};

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
  return SizeClass(4 * (PaddedElements(shape.a_elements()) +
                        PaddedElements(shape.b_elements()) +
                        PaddedElements(shape.c_elements())));
}

CudaExecutor::CudaExecutor(const Options& options)
    : options_(options), policy_(DispatchPolicy::Fixed("cublas")) {}

CudaExecutor::~CudaExecutor() {
  for (auto& device : devices_) {
    cudaSetDevice(device->ordinal);
    for (Device::Stream& s : device->streams) {
      if (s.stream != nullptr) cudaStreamSynchronize(s.stream);
      for (cudaEvent_t e : s.events) {
        if (e != nullptr) cudaEventDestroy(e);
      }
      if (s.stream != nullptr) cudaStreamDestroy(s.stream);
    }
    absl::MutexLock lock(&device->mu);
    for (auto& [size, list] : device->free) {
      for (void* block : list) cudaFree(block);
    }
    device->free.clear();
  }
}

namespace {

absl::Mutex slot_mu;  // guards every Device's streams[].busy and load

// Times `kernel` on m x n x k operands already on the device; median of
// three launches after a warm-up, in milliseconds.
absl::StatusOr<double> TimeKernel(const SgemmKernel& kernel, uint32_t m,
                                  uint32_t n, uint32_t k, const float* a,
                                  const float* b, float* c, cudaStream_t stream,
                                  cudaEvent_t start, cudaEvent_t stop) {
  const SgemmArgs args = MakeSgemmArgs(GemmProblem{m, n, k}, a, b, c);
  RETURN_IF_ERROR(kernel.Launch(args, stream));
  std::vector<float> ms;
  for (int rep = 0; rep < 3; ++rep) {
    RETURN_IF_ERROR(CudaStatus(cudaEventRecord(start, stream), "event"));
    RETURN_IF_ERROR(kernel.Launch(args, stream));
    RETURN_IF_ERROR(CudaStatus(cudaEventRecord(stop, stream), "event"));
    RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(stop), "calibration"));
    float t = 0;
    RETURN_IF_ERROR(CudaStatus(cudaEventElapsedTime(&t, start, stop), "event"));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[1];
}

}  // namespace

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
  executor->pinned_ = std::make_unique<PinnedPool>(options.pinned_cache_bytes);
  for (int ordinal : ordinals) {
    auto device = std::make_unique<Device>();
    device->ordinal = ordinal;
    RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ordinal), "cudaSetDevice"));
    cudaDeviceProp prop;
    RETURN_IF_ERROR(CudaStatus(cudaGetDeviceProperties(&prop, ordinal),
                               "cudaGetDeviceProperties"));
    device->name = prop.name;
    device->label = absl::StrCat("cuda:", ordinal, " ", prop.name);
    device->memory_bytes = prop.totalGlobalMem;
    device->compute_capability = absl::StrCat(prop.major, ".", prop.minor);
    size_t free_bytes = 0, total_bytes = 0;
    RETURN_IF_ERROR(CudaStatus(cudaMemGetInfo(&free_bytes, &total_bytes),
                               "cudaMemGetInfo"));
    device->budget = options.device_memory_budget_bytes > 0
                         ? options.device_memory_budget_bytes
                         : free_bytes / 10 * 9;
    device->streams.resize(options.streams_per_device);
    for (Device::Stream& s : device->streams) {
      RETURN_IF_ERROR(CudaStatus(
          cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking),
          "cudaStreamCreate"));
      // The batch's last event is the one its worker waits on.
      for (cudaEvent_t& e : s.events) {
        RETURN_IF_ERROR(CudaStatus(
            cudaEventCreateWithFlags(&e, options.blocking_sync
                                             ? cudaEventBlockingSync
                                             : cudaEventDefault),
            "cudaEventCreate"));
      }
    }
    executor->smallest_budget_ =
        executor->devices_.empty()
            ? device->budget
            : std::min(executor->smallest_budget_, device->budget);
    executor->devices_.push_back(std::move(device));
  }

  if (options.calibrate) {
    absl::Status calibrated = executor->Calibrate();
    if (!calibrated.ok()) {
      spdlog::warn("dispatch calibration failed ({}); auto runs cublas",
                   calibrated.ToString());
      executor->policy_ = DispatchPolicy::Fixed("cublas");
    }
  }
  spdlog::info(
      "CUDA backend: {} device(s) ({}), {} stream(s) each; dispatch "
      "table {}",
      executor->devices_.size(), executor->devices_.front()->label,
      options.streams_per_device, executor->policy_.origin());
  return executor;
}

absl::Status CudaExecutor::PrepareWorkerThread() {
  const SgemmKernel* cublas = KernelRegistry::Global().Find("cublas");
  if (cublas == nullptr) return absl::OkStatus();
  for (const std::unique_ptr<Device>& device : devices_) {
    RETURN_IF_ERROR(
        CudaStatus(cudaSetDevice(device->ordinal), "cudaSetDevice"));
    constexpr uint64_t kBytes = 3 * sizeof(float);
    ASSIGN_OR_RETURN(void* block, device->Allocate(kBytes));
    float* a = static_cast<float*>(block);
    Device::Stream& s = device->streams.front();
    const SgemmArgs args = MakeSgemmArgs(GemmProblem{1, 1, 1}, a, a + 1, a + 2);
    absl::Status status = CudaStatus(
        cudaMemsetAsync(block, 0, kBytes, s.stream), "cudaMemsetAsync");
    if (status.ok()) status = cublas->Launch(args, s.stream);
    absl::Status synced =
        CudaStatus(cudaStreamSynchronize(s.stream), "warm-up synchronize");
    device->Free(block, kBytes);
    RETURN_IF_ERROR(status);
    RETURN_IF_ERROR(synced);
  }
  return absl::OkStatus();
}

absl::Status CudaExecutor::Calibrate() {
  Device& device = *devices_.front();
  const std::vector<std::string>& candidates = AutoCandidates();
  if (!options_.dispatch_cache.empty()) {
    absl::StatusOr<DispatchPolicy> loaded =
        DispatchPolicy::Load(options_.dispatch_cache, device.name, candidates);
    if (loaded.ok()) {
      policy_ = std::move(*loaded);
      return absl::OkStatus();
    }
    spdlog::info("dispatch cache not used ({}); calibrating",
                 loaded.status().ToString());
  }
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device.ordinal), "cudaSetDevice"));
  const std::vector<uint32_t> grid = DispatchPolicy::DefaultGrid();
  const uint64_t largest = uint64_t{grid.back()} * grid.back();
  // Random operands: timing on zeros can flatter a kernel.
  std::vector<float> host(largest);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (float& x : host) x = dist(rng);
  ASSIGN_OR_RETURN(void* block, device.Allocate(3 * 4 * largest));
  float* a = static_cast<float*>(block);
  float* b = a + largest;
  float* c = b + largest;
  Device::Stream& s = device.streams.front();
  absl::Status status = [&]() -> absl::Status {
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(a, host.data(), 4 * largest,
                                   cudaMemcpyHostToDevice, s.stream),
                   "calibration upload"));
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(b, host.data(), 4 * largest,
                                   cudaMemcpyHostToDevice, s.stream),
                   "calibration upload"));
    RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(s.stream), "upload"));
    const absl::Time start = absl::Now();
    ASSIGN_OR_RETURN(
        policy_,
        DispatchPolicy::Calibrate(
            device.name, candidates, grid,
            [&](const std::string& name, uint32_t m, uint32_t n,
                uint32_t k) -> absl::StatusOr<double> {
              const SgemmKernel* kernel = KernelRegistry::Global().Find(name);
              if (kernel == nullptr) {
                return absl::NotFoundError(absl::StrCat("no kernel ", name));
              }
              return TimeKernel(*kernel, m, n, k, a, b, c, s.stream,
                                s.events[0], s.events[1]);
            }));
    spdlog::info("dispatch table: {} shapes measured in {}",
                 policy_.entries().size(),
                 absl::FormatDuration(absl::Now() - start));
    return absl::OkStatus();
  }();
  cudaStreamSynchronize(s.stream);
  device.Free(block, 3 * 4 * largest);
  RETURN_IF_ERROR(status);
  if (!options_.dispatch_cache.empty()) {
    absl::Status saved = policy_.Save(options_.dispatch_cache);
    if (!saved.ok()) spdlog::warn("dispatch cache: {}", saved.ToString());
  }
  return absl::OkStatus();
}

std::vector<DeviceDescription> CudaExecutor::devices() const {
  std::vector<DeviceDescription> out;
  for (const auto& device : devices_) {
    DeviceDescription d;
    d.id = absl::StrCat("cuda:", device->ordinal);
    d.name = device->name;
    d.memory_bytes = device->memory_bytes;
    d.compute_capability = device->compute_capability;
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::string> CudaExecutor::kernels() const {
  return KernelRegistry::Global().Names();
}

absl::StatusOr<std::string> CudaExecutor::ResolveKernel(
    const GemmProblem& shape, absl::string_view requested) const {
  const uint64_t needed = DeviceBytes(shape);
  if (needed > smallest_budget_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "job %s needs %d bytes of device memory; the device budget is %d",
        shape.ToString(), needed, smallest_budget_));
  }
  if (requested.empty() || requested == "auto") return policy_.Choose(shape);
  if (KernelRegistry::Global().Find(std::string(requested)) != nullptr) {
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
  const JobSpec& spec = live.front()->spec();
  // Split a batch too large for the memory budget into launches that fit.
  const uint64_t per_job = DeviceBytes(spec.problem);
  const size_t per_launch =
      std::max<uint64_t>(1, smallest_budget_ / 2 / per_job);
  for (size_t begin = 0; begin < live.size(); begin += per_launch) {
    RETURN_IF_ERROR(
        ExecuteChunk(live, begin, std::min(live.size(), begin + per_launch)));
  }
  return absl::OkStatus();
}

absl::Status CudaExecutor::ExecuteChunk(const Batch& batch, size_t begin,
                                        size_t end) {
  const GemmProblem& shape = batch[begin]->problem();
  const std::string& kernel_name = batch[begin]->kernel();
  const SgemmKernel* kernel = KernelRegistry::Global().Find(kernel_name);
  if (kernel == nullptr) {
    return absl::InternalError(
        absl::StrCat("kernel '", kernel_name, "' is not registered"));
  }
  const int count = static_cast<int>(end - begin);
  const uint64_t sa = PaddedElements(shape.a_elements());
  const uint64_t sb = PaddedElements(shape.b_elements());
  const uint64_t sc = PaddedElements(shape.c_elements());
  const uint64_t bytes = 4 * count * (sa + sb + sc);

  // The least-loaded device with a free stream; ties go round-robin, so
  // that light load (every device idle) still spreads over all of them.
  Device* device = nullptr;
  Device::Stream* stream = nullptr;
  {
    absl::MutexLock lock(&slot_mu);
    static size_t first_choice = 0;  // guarded by slot_mu
    size_t picked = 0;
    auto pick = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      device = nullptr;
      stream = nullptr;
      const size_t n = devices_.size();
      for (size_t i = 0; i < n; ++i) {
        const size_t index = (first_choice + i) % n;
        Device& d = *devices_[index];
        for (Device::Stream& s : d.streams) {
          if (s.busy) continue;
          if (device == nullptr || d.load < device->load) {
            device = &d;
            stream = &s;
            picked = index;
          }
          break;
        }
      }
      return device != nullptr;
    };
    slot_mu.Await(absl::Condition(&pick));
    first_choice = (picked + 1) % devices_.size();
    stream->busy = true;
    device->load += bytes;
  }
  struct Release {
    Device* device;
    Device::Stream* stream;
    uint64_t bytes;
    ~Release() {
      absl::MutexLock lock(&slot_mu);
      stream->busy = false;
      device->load -= bytes;
    }
  } release{device, stream, bytes};

  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device->ordinal), "cudaSetDevice"));
  ASSIGN_OR_RETURN(void* block, device->Allocate(bytes));
  // Whatever happens below, the stream is idle before the block goes back.
  struct FreeBlock {
    Device* device;
    cudaStream_t stream;
    void* block;
    uint64_t bytes;
    ~FreeBlock() {
      cudaStreamSynchronize(stream);
      device->Free(block, bytes);
    }
  } free_block{device, stream->stream, block, bytes};

  float* da = static_cast<float*>(block);
  float* db = da + count * sa;
  float* dc = db + count * sb;
  cudaStream_t st = stream->stream;
  cudaEvent_t* ev = stream->events;
  RETURN_IF_ERROR(CudaStatus(cudaEventRecord(ev[0], st), "cudaEventRecord"));
  for (int i = 0; i < count; ++i) {
    GemmJob& job = *batch[begin + i];
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(da + i * sa, job.a(), 4 * shape.a_elements(),
                                   cudaMemcpyHostToDevice, st),
                   "H2D of A"));
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(db + i * sb, job.b(), 4 * shape.b_elements(),
                                   cudaMemcpyHostToDevice, st),
                   "H2D of B"));
    if (shape.beta != 0.0f) {
      RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(dc + i * sc, job.c(), 4 * shape.c_elements(),
                          cudaMemcpyHostToDevice, st),
          "H2D of C"));
    }
  }
  RETURN_IF_ERROR(CudaStatus(cudaEventRecord(ev[1], st), "cudaEventRecord"));
  SgemmArgs args = MakeSgemmArgs(shape, da, db, dc);
  args.batch_count = count;
  args.stride_a = static_cast<int64_t>(sa);
  args.stride_b = static_cast<int64_t>(sb);
  args.stride_c = static_cast<int64_t>(sc);
  RETURN_IF_ERROR(kernel->Launch(args, st));
  RETURN_IF_ERROR(CudaStatus(cudaEventRecord(ev[2], st), "cudaEventRecord"));
  for (int i = 0; i < count; ++i) {
    GemmJob& job = *batch[begin + i];
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(job.c(), dc + i * sc, 4 * shape.c_elements(),
                                   cudaMemcpyDeviceToHost, st),
                   "D2H of C"));
  }
  RETURN_IF_ERROR(CudaStatus(cudaEventRecord(ev[3], st), "cudaEventRecord"));
  RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(ev[3]),
                             absl::StrCat(device->label, ": batch")));
  float ms[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    RETURN_IF_ERROR(CudaStatus(cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]),
                               "cudaEventElapsedTime"));
  }
  for (int i = 0; i < count; ++i) {
    JobTiming& t = batch[begin + i]->timing();
    t.h2d = absl::Microseconds(1000.0 * ms[0]);
    t.compute = absl::Microseconds(1000.0 * ms[1]);
    t.d2h = absl::Microseconds(1000.0 * ms[2]);
    t.device = device->label;
  }
  return absl::OkStatus();
}

}  // namespace gemm::server
