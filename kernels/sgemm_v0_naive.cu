// The teaching road (v0..v5): kept as the chapter wrote it, each file one
// step; the service's kernels start at v6 (sgemm_warp_tile.cuh).
//
// v0, the chapter's naive kernel: one thread per element of C, with
// threadIdx.x walking the rows of C. A warp's 32 threads then read 32
// different rows of A (nothing coalesces) and all read the same element of B.
// Kept as the baseline the later versions are measured against.
#include "kernels/sgemm_common.cuh"
#include "kernels/sgemm_launchers.h"

namespace gemm::kernels {
namespace {

using detail::BatchMember;
using detail::CeilDiv;

// 32 x 32 threads per block, as in the chapter.
constexpr int kBlockDim = 32;

template <bool kTransA,  // A is stored transposed (k x m)
          bool kTransB>  // B is stored transposed (n x k)
__global__ void __launch_bounds__(kBlockDim* kBlockDim)
    SgemmNaiveKernel(SgemmArgs args) {
  const int row =
      blockIdx.x * blockDim.x + threadIdx.x;  // x is the row: the point of v0
  const int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= args.m || col >= args.n) return;
  const BatchMember p = detail::SelectBatchMember(args);
  float acc = 0.f;
  for (int k = 0; k < args.k; ++k) {
    acc += detail::LoadOperand<kTransA>(p.a, args.lda, row, k) *
           detail::LoadOperand<kTransB>(p.b, args.ldb, k, col);
  }
  detail::StoreOutput(p.c + static_cast<int64_t>(row) * args.ldc + col, acc,
                      args.alpha, args.beta);
}

}  // namespace

cudaError_t LaunchSgemmNaive(const SgemmArgs& args, cudaStream_t stream) {
  return detail::ForEachBatchChunk(args, [&](const SgemmArgs& chunk) {
    const dim3 block(kBlockDim, kBlockDim);
    const dim3 grid(CeilDiv(chunk.m, kBlockDim), CeilDiv(chunk.n, kBlockDim),
                    chunk.batch_count);
    detail::DispatchTransposes(chunk, [&](auto trans_a, auto trans_b) {
      SgemmNaiveKernel<decltype(trans_a)::value, decltype(trans_b)::value>
          <<<grid, block, 0, stream>>>(chunk);
    });
  });
}

}  // namespace gemm::kernels
