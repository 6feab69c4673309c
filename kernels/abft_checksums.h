// The result check (ABFT, common/abft.h) on the device, for a batch packed
// as the CUDA executor packs it: the same passes as the host's
// Reduce2DOnHost, accumulated in float64 with atomics, and the comparison
// of every row and column against its tolerance (abft::Ratio, the same code
// as the host's), leaving each member's verdict in its scratch
// (abft::VerdictFromSlots reads it back), then the suspect lines of jobs
// with beta 0 verified element by element (common/abft.h's second stage).
//
// Cost: A is read twice, B, C_in (beta != 0) and C once each, in float32;
// the float64 vectors are O(M + N + K). Memory-bound: at 4096^3 about 256 MB
// of reads, against the GEMM's 137 GFLOP.
//
// Thread-safety: stateless; safe from any thread.
//
//   AbftBatch batch{problem, count, a, sa, b, sb, c, sc, scratch, ss};
//   LaunchAbftPrepare(batch, stream);  // before the GEMM overwrites C
//   LaunchAbftPredict(batch, side);    // beside the GEMM, after Prepare
//   ... the GEMM on `stream`, then `stream` waits for `side` ...
//   LaunchAbftJudge(batch, stream);    // then copy the verdicts back
#ifndef GEMM_KERNELS_ABFT_CHECKSUMS_H_
#define GEMM_KERNELS_ABFT_CHECKSUMS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/gemm_problem.h"

namespace gemm::kernels {

// One launch's operands: `count` members of one problem, each at its
// stride (in elements) from the previous; `scratch` holds
// abft::Layout(problem).slots() doubles per member, `stride_scratch` apart.
struct AbftBatch {
  GemmProblem problem;
  int count = 1;
  const float* a = nullptr;
  int64_t stride_a = 0;
  const float* b = nullptr;
  int64_t stride_b = 0;
  const float* c = nullptr;
  int64_t stride_c = 0;
  double* scratch = nullptr;
  int64_t stride_scratch = 0;
  // The relative error of converting an input to the precision the kernel
  // computed in (common/precision.h's InputUnitRoundoff; 0 for float32).
  double input_roundoff = 0.0;
  // Whether LaunchAbftJudge verifies suspect lines (common/abft.h's second
  // stage); off only to measure the line bound alone (check-bench).
  bool verify = true;
};

// Zeroes the scratch and sums the input C (when beta is not 0): before the
// GEMM, which overwrites C.
cudaError_t LaunchAbftPrepare(const AbftBatch& batch, cudaStream_t stream);

// The predictions from A and B, after LaunchAbftPrepare; they may run
// beside the GEMM (on another stream), which only reads A and B.
cudaError_t LaunchAbftPredict(const AbftBatch& batch, cudaStream_t stream);

// The result's sums and every member's verdict, suspect lines verified
// (beta 0 only: the input C is gone), after the GEMM. A verified line costs
// K * length float64 multiply-adds, at most kMaxVerifiedLines a member.
cudaError_t LaunchAbftJudge(const AbftBatch& batch, cudaStream_t stream);

}  // namespace gemm::kernels

#endif  // GEMM_KERNELS_ABFT_CHECKSUMS_H_
