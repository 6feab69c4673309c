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
//                    CalibrateDispatch(device, options, true));
//   std::string kernel = policy.Choose(
//       problem, AllowedByPrecision(policy.kernels())[int(Precision::kFp32)]);
#ifndef GEMM_SERVER_CUDA_DISPATCH_CALIBRATION_H_
#define GEMM_SERVER_CUDA_DISPATCH_CALIBRATION_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/cuda/cuda_device.h"
#include "server/cuda/cuda_executor_options.h"
#include "server/cuda/dispatch_policy.h"
#include "server/cuda/shape_tuner.h"

namespace gemm::server {

// The kernels "auto" chooses between, in every precision: with_wgmma adds
// v12 (3xTF32, fp32-tensor), which runs only on compute capability 9.0.
// The executor lets auto pick among those a job's precision allows.
std::vector<std::string> AutoCandidates(bool with_wgmma);

// The registry's kernels that every one of `devices` runs (v12 only where
// all are compute capability 9.0), in the registry's order.
std::vector<std::string> KernelsEveryDeviceRuns(
    const std::vector<std::unique_ptr<CudaDevice>>& devices);

// The shape tuner's candidates (shape_tuner.h): every one of `kernels`
// but the chapter's teaching road (v0..v5), which never wins, and
// v10-packed, which runs only by name: the split-K kernels included, since
// the tuner measures them at the job's own shape.
std::vector<std::string> TunerCandidates(
    const std::vector<std::string>& kernels);

// The shape tuner's measuring function on `device`: a low-priority stream
// of its own, random operands from the device's pool for the time of one
// shape's measurement (shapes needing more than an eighth of its budget are
// not measured), each kernel timed as the calibration times (median of up
// to 11 launches, about 5 ms of them) in two interleaved rounds, the better
// kept. `device` must outlive the function.
ShapeTuner::Measure ShapeMeasure(CudaDevice& device);

// For each precision (indexed by its enum value), which of `kernels` a job
// of that precision may run (KernelMayServe): the masks the executor hands
// DispatchPolicy::Choose.
std::vector<std::vector<bool>> AllowedByPrecision(
    const std::vector<std::string>& kernels);

// The dispatch table for `device` over AutoCandidates(with_wgmma), from
// options.dispatch_cache or measured on the device (see above).
absl::StatusOr<DispatchPolicy> CalibrateDispatch(
    CudaDevice& device, const CudaExecutorOptions& options, bool with_wgmma);

}  // namespace gemm::server

#endif  // GEMM_SERVER_CUDA_DISPATCH_CALIBRATION_H_
