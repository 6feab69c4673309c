#include "kernels/launch_timer.h"

#include <algorithm>
#include <numeric>

namespace gemm::kernels {
namespace {

// Two timing events, destroyed with it.
class EventPair {
 public:
  EventPair() = default;
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }
  absl::Status Create() {
    absl::Status s = CudaStatus(cudaEventCreate(&start_), "cudaEventCreate");
    if (s.ok()) s = CudaStatus(cudaEventCreate(&stop_), "cudaEventCreate");
    return s;
  }
  cudaEvent_t start() const { return start_; }
  cudaEvent_t stop() const { return stop_; }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// One launch between the events, waited for; its duration in ms.
absl::StatusOr<float> TimeOne(const SgemmKernel& kernel, const SgemmArgs& args,
                              cudaStream_t stream, const EventPair& events) {
  absl::Status s =
      CudaStatus(cudaEventRecord(events.start(), stream), "cudaEventRecord");
  if (s.ok()) s = kernel.Launch(args, stream);
  if (s.ok()) {
    s = CudaStatus(cudaEventRecord(events.stop(), stream), "cudaEventRecord");
  }
  if (s.ok()) {
    s = CudaStatus(cudaEventSynchronize(events.stop()), "cudaEventSynchronize");
  }
  float ms = 0;
  if (s.ok()) {
    s = CudaStatus(cudaEventElapsedTime(&ms, events.start(), events.stop()),
                   "cudaEventElapsedTime");
  }
  if (!s.ok()) return s;
  return ms;
}

}  // namespace

double LaunchTimes::MedianMs() const {
  if (ms.empty()) return 0;
  std::vector<float> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t h = sorted.size() / 2;
  return sorted.size() % 2 ? sorted[h]
                           : 0.5 * (double{sorted[h - 1]} + sorted[h]);
}

double LaunchTimes::MinMs() const {
  return ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end());
}

double LaunchTimes::MeanMs() const {
  if (ms.empty()) return 0;
  return std::accumulate(ms.begin(), ms.end(), 0.0) / ms.size();
}

absl::StatusOr<LaunchTimes> TimeLaunches(const SgemmKernel& kernel,
                                         const SgemmArgs& args,
                                         cudaStream_t stream,
                                         const LaunchTimingOptions& options) {
  if (options.repeats < 1) {
    return absl::InvalidArgumentError("repeats must be at least 1");
  }
  EventPair events;
  if (absl::Status s = events.Create(); !s.ok()) return s;
  for (int i = 0; i < options.warmup; ++i) {
    if (absl::Status s = kernel.Launch(args, stream); !s.ok()) return s;
  }
  LaunchTimes times;
  int repeats = options.repeats;
  for (int i = 0; i < repeats; ++i) {
    absl::StatusOr<float> ms = TimeOne(kernel, args, stream, events);
    if (!ms.ok()) return ms.status();
    times.ms.push_back(*ms);
    if (i == 0 && options.max_seconds > 0) {
      const int affordable =
          static_cast<int>(options.max_seconds * 1e3 / std::max(*ms, 1e-3f));
      repeats = std::clamp(affordable, 1, options.repeats);
    }
  }
  return times;
}

}  // namespace gemm::kernels
