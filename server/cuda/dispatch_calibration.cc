#include "server/cuda/dispatch_calibration.h"

#include <algorithm>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/precision.h"
#include "common/status_macros.h"
#include "kernels/launch_timer.h"
#include "kernels/sgemm.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

using kernels::CudaStatus;
using kernels::KernelRegistry;
using kernels::MakeSgemmArgs;
using kernels::SgemmKernel;

// Times `kernel` on m x n x k operands already on the device, in
// milliseconds: the median of up to 11 launches after two warm-ups, cut to
// about 5 ms of launches for large shapes. Small shapes take tens of
// microseconds, where three launches let noise pick the kernel (a median of
// 3 sent 333x555x777 to a kernel 1.25x slower than cuBLAS).
absl::StatusOr<double> TimeKernel(const SgemmKernel& kernel, uint32_t m,
                                  uint32_t n, uint32_t k, const float* a,
                                  const float* b, float* c,
                                  cudaStream_t stream) {
  ASSIGN_OR_RETURN(
      kernels::LaunchTimes times,
      kernels::TimeLaunches(
          kernel, MakeSgemmArgs(GemmProblem{m, n, k}, a, b, c), stream,
          {.warmup = 2, .repeats = 11, .max_seconds = 0.005}));
  return times.MedianMs();
}

// Measures every candidate on the grid, on operands in one device block.
absl::StatusOr<DispatchPolicy> Measure(CudaDevice& device, bool with_wgmma) {
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device.ordinal()), "cudaSetDevice"));
  const std::vector<uint32_t> grid = DispatchPolicy::DefaultGrid();
  const uint64_t largest = uint64_t{grid.back()} * grid.back();
  // Random operands: timing on zeros can flatter a kernel.
  std::vector<float> host(largest);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (float& x : host) x = dist(rng);
  ASSIGN_OR_RETURN(void* block, device.pool().Allocate(3 * 4 * largest));
  float* a = static_cast<float*>(block);
  float* b = a + largest;
  float* c = b + largest;
  const cudaStream_t stream = device.stream(0).stream;
  absl::StatusOr<DispatchPolicy> policy =
      [&]() -> absl::StatusOr<DispatchPolicy> {
    RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(a, host.data(), 4 * largest,
                                               cudaMemcpyHostToDevice, stream),
                               "calibration upload"));
    RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(b, host.data(), 4 * largest,
                                               cudaMemcpyHostToDevice, stream),
                               "calibration upload"));
    RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream), "upload"));
    const absl::Time start = absl::Now();
    ASSIGN_OR_RETURN(
        DispatchPolicy measured,
        DispatchPolicy::Calibrate(
            device.name(), AutoCandidates(with_wgmma), grid,
            [&](const std::string& name, uint32_t m, uint32_t n,
                uint32_t k) -> absl::StatusOr<double> {
              const SgemmKernel* kernel = KernelRegistry::Global().Find(name);
              if (kernel == nullptr) {
                return absl::NotFoundError(absl::StrCat("no kernel ", name));
              }
              return TimeKernel(*kernel, m, n, k, a, b, c, stream);
            }));
    spdlog::info("dispatch table: {} shapes measured in {}",
                 measured.entries().size(),
                 absl::FormatDuration(absl::Now() - start));
    return measured;
  }();
  cudaStreamSynchronize(stream);
  device.pool().Free(block, 3 * 4 * largest);
  return policy;
}

// The tuner's measurements on one device: a low-priority stream of its
// own, and random operands of the shape measured (timing on zeros can
// flatter a kernel), held only while it is measured.
class TunerDevice {
 public:
  explicit TunerDevice(CudaDevice& device) : device_(device) {}
  ~TunerDevice() {
    if (stream_ != nullptr) {
      cudaSetDevice(device_.ordinal());
      cudaStreamDestroy(stream_);
    }
  }

  // Each kernel's time at `shape`: the better of two rounds (kernels
  // interleaved, so that a moment of noise or a clock change does not
  // decide alone), negative where a kernel failed both.
  std::vector<double> TimeAll(const GemmProblem& shape,
                              const std::vector<std::string>& names) {
    std::vector<double> ms(names.size(), -1.0);
    if (!CudaStatus(cudaSetDevice(device_.ordinal()), "cudaSetDevice").ok()) {
      return ms;
    }
    const uint64_t a = uint64_t{shape.m} * shape.k;
    const uint64_t b = uint64_t{shape.k} * shape.n;
    const uint64_t bytes = 4 * (a + b + uint64_t{shape.m} * shape.n);
    void* block = nullptr;
    if (absl::Status ready = Prepare(bytes, a + b, &block); !ready.ok()) {
      spdlog::warn("shape tuner: {} not measured: {}", shape.ToString(),
                   ready.ToString());
      return ms;
    }
    const float* a_ptr = static_cast<float*>(block);
    const float* b_ptr = a_ptr + a;
    float* c_ptr = static_cast<float*>(block) + a + b;
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < names.size(); ++i) {
        const SgemmKernel* kernel = KernelRegistry::Global().Find(names[i]);
        if (kernel == nullptr) continue;
        absl::StatusOr<double> t = TimeKernel(
            *kernel, shape.m, shape.n, shape.k, a_ptr, b_ptr, c_ptr, stream_);
        if (t.ok() && (ms[i] < 0 || *t < ms[i])) ms[i] = *t;
      }
    }
    cudaStreamSynchronize(stream_);
    device_.pool().Free(block, bytes);
    return ms;
  }

 private:
  // The stream, and `bytes` from the device's pool (at most an eighth of
  // its budget) with its first `random` floats random.
  absl::Status Prepare(uint64_t bytes, uint64_t random, void** block) {
    if (stream_ == nullptr) {
      int lowest = 0, greatest = 0;
      cudaDeviceGetStreamPriorityRange(&lowest, &greatest);
      RETURN_IF_ERROR(CudaStatus(
          cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, lowest),
          "tuner stream"));
    }
    if (bytes > device_.pool().budget() / 8) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "needs %d bytes, more than an eighth of the device budget", bytes));
    }
    ASSIGN_OR_RETURN(*block, device_.pool().Allocate(bytes));
    if (random_.empty()) {
      random_.resize(size_t{1} << 20);
      std::mt19937 rng(7);
      std::uniform_real_distribution<float> dist(-1.f, 1.f);
      for (float& x : random_) x = dist(rng);
    }
    float* to = static_cast<float*>(*block);
    absl::Status copied;
    for (uint64_t at = 0; at < random && copied.ok(); at += random_.size()) {
      const uint64_t n = std::min<uint64_t>(random_.size(), random - at);
      copied = CudaStatus(cudaMemcpyAsync(to + at, random_.data(), 4 * n,
                                          cudaMemcpyHostToDevice, stream_),
                          "tuner upload");
    }
    if (copied.ok()) {
      copied = CudaStatus(cudaStreamSynchronize(stream_), "tuner upload");
    }
    if (!copied.ok()) {
      cudaStreamSynchronize(stream_);
      device_.pool().Free(*block, bytes);
    }
    return copied;
  }

  CudaDevice& device_;
  cudaStream_t stream_ = nullptr;
  std::vector<float> random_;
};

}  // namespace

std::vector<std::string> TunerCandidates(
    const std::vector<std::string>& kernels) {
  std::vector<std::string> candidates;
  for (const std::string& name : kernels) {
    if (name.size() == 2 && name[0] == 'v' && name[1] >= '0' &&
        name[1] <= '5') {
      continue;  // the teaching road
    }
    // Within 4 to 6% of cuBLAS on large products, where the tuner's one
    // or two launches a kernel cannot tell them apart (decision 0063).
    if (name == "v10-packed") continue;
    candidates.push_back(name);
  }
  return candidates;
}

ShapeTuner::Measure ShapeMeasure(CudaDevice& device) {
  auto state = std::make_shared<TunerDevice>(device);
  return [state](const GemmProblem& shape,
                 const std::vector<std::string>& kernels) {
    return state->TimeAll(shape, kernels);
  };
}

// The project's best own kernels, as tile configurations measured per
// shape, and cuBLAS: v10 wins on large and odd shapes, v10-64x64 and
// v7-64x64 where the 128 x 128 grid is too small for the GPU, v6 and v7 on
// some mid-sized ones (docs/reference/kernels.md); v0..v5 never beat them. With
// with_wgmma, v12 (3xTF32) for the jobs whose precision allows it. The
// split-K kernels (v8, v11) are left out of the table: their split count
// jumps between the grid's shapes, so interpolating misjudges them off the
// grid (with v8, auto ran 333x555x777 1.27x slower than cuBLAS); the shape
// tuner, which measures at the job's own shape, has them.
std::vector<std::string> AutoCandidates(bool with_wgmma) {
  std::vector<std::string> candidates = {"v6",  "v7",        "v7-64x64",
                                         "v10", "v10-64x64", "cublas"};
  if (with_wgmma) candidates.push_back("v12");
  return candidates;
}

std::vector<std::string> KernelsEveryDeviceRuns(
    const std::vector<std::unique_ptr<CudaDevice>>& devices) {
  std::vector<std::string> names;
  for (const std::string& name : KernelRegistry::Global().Names()) {
    const SgemmKernel* kernel = KernelRegistry::Global().Find(name);
    bool everywhere = true;
    for (const std::unique_ptr<CudaDevice>& device : devices) {
      everywhere = everywhere && kernel->RunsOnDevice(device->ordinal());
    }
    if (everywhere) names.push_back(name);
  }
  return names;
}

std::vector<std::vector<bool>> AllowedByPrecision(
    const std::vector<std::string>& kernels) {
  std::vector<std::vector<bool>> allowed;
  for (Precision precision : kAllPrecisions) {
    const size_t at = static_cast<size_t>(precision);
    if (allowed.size() <= at) allowed.resize(at + 1);
    for (const std::string& name : kernels) {
      const SgemmKernel* kernel = KernelRegistry::Global().Find(name);
      allowed[at].push_back(kernel != nullptr &&
                            KernelMayServe(kernel->precision(), precision));
    }
  }
  return allowed;
}

absl::StatusOr<DispatchPolicy> CalibrateDispatch(
    CudaDevice& device, const CudaExecutorOptions& options, bool with_wgmma) {
  if (!options.dispatch_cache.empty()) {
    absl::StatusOr<DispatchPolicy> loaded = DispatchPolicy::Load(
        options.dispatch_cache, device.name(), AutoCandidates(with_wgmma));
    if (loaded.ok()) return loaded;
    spdlog::info("dispatch cache not used ({}); calibrating",
                 loaded.status().ToString());
  }
  ASSIGN_OR_RETURN(DispatchPolicy policy, Measure(device, with_wgmma));
  if (!options.dispatch_cache.empty()) {
    absl::Status saved = policy.Save(options.dispatch_cache);
    if (!saved.ok()) spdlog::warn("dispatch cache: {}", saved.ToString());
  }
  return policy;
}

}  // namespace gemm::server
