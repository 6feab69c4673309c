// Cutting one large job into blocks of rows of C, sent as jobs of their own
// (GemmClient::Options.split_rows), and putting their outcomes back
// together: one callback with the merged timing, or the first error.
//
// Thread-safety: SplitRows is stateless; SplitResult is thread-safe (its
// parts may end on any threads, in any order).
//
//   auto result = std::make_shared<SplitResult>(args.problem, parts, done);
//   for (const RowBlock& block : SplitRows(args, c_out, parts))
//     Start(block.args, block.c_out, [result](auto r) { result->PartDone(r);
//     });
#ifndef GEMM_CLIENT_LIB_SPLIT_JOB_H_
#define GEMM_CLIENT_LIB_SPLIT_JOB_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/lib/gemm_args.h"

namespace gemm::client {

// One part of a split job: consecutive rows of op(A), C and c_out, with all
// of B.
struct RowBlock {
  GemmArgs args;
  float* c_out = nullptr;
};

// Whether `args` can be cut into `parts` row blocks: not with trans_a (the
// rows of op(A) are not contiguous) nor with fewer rows than parts.
bool CanSplitRows(const GemmArgs& args, int parts);

// `parts` blocks of consecutive rows, in order, whose sizes differ by at
// most one. Requires CanSplitRows(args, parts).
std::vector<RowBlock> SplitRows(const GemmArgs& args, float* c_out, int parts);

// Collects the outcomes of a split job's parts; the last part to end calls
// `done` once: with the first error if any part failed, else with the
// merged timing (device work added up; queueing and server time, which
// overlap, the longest part's; GFLOP/s over the whole problem's compute).
class SplitResult {
 public:
  SplitResult(const GemmProblem& whole, int parts, GemmCallback done);

  void PartDone(absl::StatusOr<v1::Timing> result);

 private:
  const double flops_;
  absl::Mutex mu_;
  int remaining_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  v1::Timing timing_ ABSL_GUARDED_BY(mu_);
  GemmCallback done_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gemm::client

#endif  // GEMM_CLIENT_LIB_SPLIT_JOB_H_
