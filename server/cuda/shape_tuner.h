// ShapeTuner: auto's choice for the shapes jobs actually have, measured at
// the shape itself, off the request path.
//
// The dispatch table (dispatch_policy.h) interpolates between the grid's
// powers of two, which misjudges kernels whose behaviour jumps between grid
// points (the split-K kernels v8 and v11 pick their split count by shape)
// and shapes where two kernels cross. The tuner closes that gap: the first
// Lookup() of a shape returns "" (the caller uses the table's choice) and
// queues the shape; the tuner's own thread then times every candidate at
// that exact shape (with the measuring function the CUDA executor supplies,
// so this file needs no GPU), and later lookups of the shape get the
// fastest candidate their mask allows. Shapes are keyed by (m, n, k); a
// kernel that cannot run a shape (CanImplement) is measured as failed and
// never chosen for it. At most Options::max_shapes shapes are kept; past
// that, new shapes keep the table's choice.
//
// Thread-safety: thread-safe. Lookup() never blocks on a measurement.
//
//   ShapeTuner tuner({"v10", "v11", "cublas"}, measure, {});
//   std::string kernel = tuner.Lookup(shape, allowed);
//   if (kernel.empty()) kernel = policy.Choose(shape, table_allowed);
#ifndef GEMM_SERVER_CUDA_SHAPE_TUNER_H_
#define GEMM_SERVER_CUDA_SHAPE_TUNER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/gemm_problem.h"

namespace gemm::server {

class ShapeTuner {
 public:
  // Times each of `kernels` on an m x n x k problem (no transposes): one
  // time per kernel in milliseconds, negative where the kernel cannot run
  // the shape or the measurement failed (missing ones count as failed).
  // Holds whatever it needs only while it runs. Called on the tuner's
  // thread only.
  using Measure = std::function<std::vector<double>(
      const GemmProblem& shape, const std::vector<std::string>& kernels)>;
  // A Measure that times one kernel after another with `time`.
  static Measure EachKernel(
      std::function<absl::StatusOr<double>(const std::string& kernel,
                                           const GemmProblem& shape)>
          time);

  struct Options {
    // Shapes measured and kept at most.
    size_t max_shapes = 4096;
  };

  // One tuned shape: each candidate's time (in kernels() order; negative
  // where it failed), for /metrics-free inspection (tests, benchmarks).
  struct Tuned {
    uint32_t m = 0, n = 0, k = 0;
    std::vector<double> ms;
  };

  ShapeTuner(std::vector<std::string> kernels, Measure measure,
             Options options);
  // Stops the thread; a measurement under way is finished first.
  ~ShapeTuner();
  ShapeTuner(const ShapeTuner&) = delete;
  ShapeTuner& operator=(const ShapeTuner&) = delete;

  // The fastest measured kernel for `shape` of those with allowed[i] true
  // (i indexes kernels(); a shorter mask leaves the rest out), or "" when
  // the shape is not measured yet (the first call queues it), could not be
  // kept, or no allowed kernel ran it.
  std::string Lookup(const GemmProblem& shape,
                     const std::vector<bool>& allowed);

  // Blocks until every queued shape is measured (benchmarks and tests).
  void WaitIdle();

  const std::vector<std::string>& kernels() const { return kernels_; }
  std::vector<Tuned> tuned() const;

 private:
  using Key = std::tuple<uint32_t, uint32_t, uint32_t>;
  void Run();

  const std::vector<std::string> kernels_;
  const Measure measure_;
  const Options options_;
  mutable absl::Mutex mu_;
  // Every shape seen and kept: empty times while queued.
  std::map<Key, std::vector<double>> shapes_ ABSL_GUARDED_BY(mu_);
  std::deque<Key> queue_ ABSL_GUARDED_BY(mu_);
  bool measuring_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CUDA_SHAPE_TUNER_H_
