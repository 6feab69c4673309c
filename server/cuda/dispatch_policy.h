// DispatchPolicy: which kernel "auto" runs for a shape, from a table of
// timings measured on the GPU at hand.
//
// The table holds, for a grid of (m, n, k), the time of each candidate
// kernel (AutoCandidates(), dispatch_calibration.h). Choose() estimates
// each kernel's time at the shape by interpolating the logarithms of its
// times at the eight grid points around it (trilinear, on log2 m, n and k;
// shapes beyond the grid take its edge) and returns the fastest of those a
// mask allows (the executor's: the candidates of the job's precision): where
// two kernels cross between grid points the nearest point alone would pick
// the wrong one. A table that is not a full grid falls back to the nearest
// point's fastest allowed kernel. The table is
// measured once at start (Calibrate, with a measuring function the CUDA
// executor supplies, so this file needs no GPU) and may be cached in a
// small text file (Save/Load), keyed by the device name.
//
// Thread-safety: immutable once built; Choose() may be called from any
// thread.
//
//   ASSIGN_OR_RETURN(DispatchPolicy policy,
//                    DispatchPolicy::Calibrate("NVIDIA H200", {"v6", "v7",
//                    "cublas"},
//                                              DispatchPolicy::DefaultGrid(),
//                                              measure));
//   std::string kernel = policy.Choose(shape);  // one of the candidates
#ifndef GEMM_SERVER_CUDA_DISPATCH_POLICY_H_
#define GEMM_SERVER_CUDA_DISPATCH_POLICY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/core/gemm_job.h"

namespace gemm::server {

class DispatchPolicy {
 public:
  // One grid point: its shape and each candidate's time, in the order of
  // kernels().
  struct Entry {
    uint32_t m = 0, n = 0, k = 0;
    std::vector<double> ms;
  };
  // Times `kernel` on an m x n x k problem (no transposes), in milliseconds.
  using Measure = std::function<absl::StatusOr<double>(
      const std::string& kernel, uint32_t m, uint32_t n, uint32_t k)>;

  // The sizes each of m, n and k takes in the default sweep: 64 .. 4096 in
  // powers of two (7^3 = 343 shapes; about a second on an H200).
  static std::vector<uint32_t> DefaultGrid();

  // A policy that always picks `kernel` (no table).
  static DispatchPolicy Fixed(const std::string& kernel);

  // Measures every kernel on every (m, n, k) from `grid`^3.
  static absl::StatusOr<DispatchPolicy> Calibrate(
      const std::string& device_name, const std::vector<std::string>& kernels,
      const std::vector<uint32_t>& grid, const Measure& measure);

  // Reads a table written by Save(). NOT_FOUND when the file is absent,
  // FAILED_PRECONDITION when it was measured on another device or lacks
  // one of `kernels`, INVALID_ARGUMENT when it is malformed.
  static absl::StatusOr<DispatchPolicy> Load(
      const std::string& path, const std::string& device_name,
      const std::vector<std::string>& kernels);
  absl::Status Save(const std::string& path) const;

  // The fastest candidate for `shape`, of every precision (tests; the
  // executor always passes a mask).
  std::string Choose(const GemmProblem& shape) const;
  // The fastest for `shape` of the kernels with allowed[i] true (i indexes
  // kernels(); a shorter mask leaves the rest out). Empty when none is
  // allowed. The executor passes the kernels a job's precision allows.
  std::string Choose(const GemmProblem& shape,
                     const std::vector<bool>& allowed) const;

  const std::string& device_name() const { return device_name_; }
  const std::vector<std::string>& kernels() const { return kernels_; }
  const std::vector<Entry>& entries() const { return entries_; }
  // "calibrated", "loaded from PATH" or "fixed".
  const std::string& origin() const { return origin_; }

 private:
  // An entry as Choose() needs it: its shape in log2, worked out once
  // rather than per job (it was ~5% of the server's CPU for 128^3 jobs).
  struct Point {
    double log_m = 0, log_n = 0, log_k = 0;
  };
  void Index();
  // The interpolated choice; false when the table is not a full grid.
  bool ChooseInterpolated(const GemmProblem& shape,
                          const std::vector<bool>& allowed,
                          size_t* kernel) const;

  std::string device_name_;
  std::vector<std::string> kernels_;
  std::vector<Entry> entries_;
  std::vector<Point> points_;       // one per entry
  std::vector<bool> every_kernel_;  // Choose(shape)'s mask: all true
  // The full grid, when the entries form one: the axes' log2 values and
  // each kernel's log time at [m][n][k] (flattened), else empty.
  std::vector<double> axis_m_, axis_n_, axis_k_;
  std::vector<std::vector<double>> log_ms_;  // [kernel][(i * N + j) * K + l]
  std::string origin_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CUDA_DISPATCH_POLICY_H_
