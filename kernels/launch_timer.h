// TimeLaunches: the one event-timing loop of this project. It times
// SgemmKernel::Launch on a stream with CUDA events: untimed warm-up
// launches, then timed ones, each between two events and waited for. The
// server's dispatch calibration, gemm-bench and dispatch-bench all use it.
//
// Thread-safety: a stateless function; the stream's device must be the
// calling thread's current device (as for Launch).
//
//   ASSIGN_OR_RETURN(LaunchTimes times,
//                    TimeLaunches(*kernel, args, stream, {.warmup = 1, .repeats
//                    = 3}));
//   double ms = times.MedianMs();
#ifndef GEMM_KERNELS_LAUNCH_TIMER_H_
#define GEMM_KERNELS_LAUNCH_TIMER_H_

#include <cuda_runtime_api.h>

#include <vector>

#include "absl/status/statusor.h"
#include "kernels/sgemm.h"

namespace gemm::kernels {

struct LaunchTimingOptions {
  // Untimed launches first. Default 1.
  int warmup = 1;
  // Timed launches, at least 1. Default 3.
  int repeats = 3;
  // Above 0: after the first timed launch, the repeats are cut to about
  // this many seconds' worth (at least one). Default 0: no cap.
  double max_seconds = 0;
};

// The timed launches' durations, in milliseconds, in launch order.
struct LaunchTimes {
  std::vector<float> ms;

  // The median; of an even count, the mean of the middle two.
  double MedianMs() const;
  double MinMs() const;
  double MeanMs() const;
};

// Launches `kernel` on `args` and `stream` as `options` say and returns the
// timed launches' durations. The events are its own (created and destroyed
// here). Errors: the launch's status, or INTERNAL for a CUDA error.
absl::StatusOr<LaunchTimes> TimeLaunches(
    const SgemmKernel& kernel, const SgemmArgs& args, cudaStream_t stream,
    const LaunchTimingOptions& options = {});

}  // namespace gemm::kernels

#endif  // GEMM_KERNELS_LAUNCH_TIMER_H_
