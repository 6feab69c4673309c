// CalibrateDispatch: the CUDA backend's dispatch table for "auto", loaded
// from the cache file when it holds one for this GPU, else measured at
// start: every candidate kernel (AutoCandidates()) on every shape of
// DispatchPolicy::DefaultGrid() on random operands, each the median of
// up to 11 timed launches after two warm-ups (kernels/launch_timer.h), and
// saved to the cache file when one is set.
//
// Thread-safety: call before the device takes batches (it uses the
// device's first stream).
//
//   ASSIGN_OR_RETURN(DispatchPolicy policy,
//                    CalibrateDispatch(device, options));
//   std::string kernel = policy.Choose(problem);  // "v6", "v7" or "cublas"
#ifndef GEMM_SERVER_DISPATCH_CALIBRATION_H_
#define GEMM_SERVER_DISPATCH_CALIBRATION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/cuda_device.h"
#include "server/cuda_executor_options.h"
#include "server/dispatch_policy.h"

namespace gemm::server {

// The kernels "auto" chooses between.
std::vector<std::string> AutoCandidates();

// The dispatch table for `device`, from options.dispatch_cache or measured
// on the device (see above).
absl::StatusOr<DispatchPolicy> CalibrateDispatch(
    CudaDevice& device, const CudaExecutorOptions& options);

}  // namespace gemm::server

#endif  // GEMM_SERVER_DISPATCH_CALIBRATION_H_
