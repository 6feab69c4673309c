// The teaching road (v0..v5): kept as the chapter wrote it, each file one
// step; the service's kernels start at v6 (sgemm_warp_tile.cuh).
//
// v3, one-dimensional register tiling: a block owns a 64 x 64 tile of C and
// walks K in slices of 8; each of its 512 threads computes a column of 8
// outputs (the thread tile), so an element of op(B) read from shared memory
// into a register is reused 8 times.
#include "kernels/sgemm_common.cuh"
#include "kernels/sgemm_launchers.h"

namespace gemm::kernels {
namespace {

using detail::BatchMember;
using detail::CeilDiv;

template <int kBlockM,   // block tile rows (of C)
          int kBlockN,   // block tile columns (of C)
          int kBlockK,   // K slice staged in shared memory per step
          int kThreadM,  // thread tile: rows of one column of C per thread
          bool kTransA,  // A is stored transposed (k x m)
          bool kTransB>  // B is stored transposed (n x k)
__global__ void __launch_bounds__((kBlockM * kBlockN) / kThreadM)
    Sgemm1dRegisterTilingKernel(SgemmArgs args) {
  constexpr int kThreads = (kBlockM * kBlockN) / kThreadM;
  static_assert(kBlockM * kBlockK == kThreads && kBlockK * kBlockN == kThreads,
                "one element of each tile per thread per load");
  __shared__ float tile_a[kBlockM * kBlockK];  // [m][k]
  __shared__ float tile_b[kBlockK * kBlockN];  // [k][n]
  const int tid = threadIdx.x;
  const int thread_col = tid % kBlockN, thread_row = tid / kBlockN;
  const int block_row = blockIdx.y * kBlockM, block_col = blockIdx.x * kBlockN;
  const BatchMember p = detail::SelectBatchMember(args);

  float acc[kThreadM] = {0.f};
  for (int k0 = 0; k0 < args.k; k0 += kBlockK) {
    detail::LoadTileScalar<kBlockM, kBlockK, kThreads, kTransA>(
        p.a, args.lda, args.m, args.k, block_row, k0, tid,
        [&](int r, int c, float v) { tile_a[r * kBlockK + c] = v; });
    detail::LoadTileScalar<kBlockK, kBlockN, kThreads, kTransB>(
        p.b, args.ldb, args.k, args.n, k0, block_col, tid,
        [&](int r, int c, float v) { tile_b[r * kBlockN + c] = v; });
    __syncthreads();
#pragma unroll
    for (int dot = 0; dot < kBlockK; ++dot) {
      const float b =
          tile_b[dot * kBlockN +
                 thread_col];  // one read of B, reused kThreadM times
#pragma unroll
      for (int r = 0; r < kThreadM; ++r)
        acc[r] += tile_a[(thread_row * kThreadM + r) * kBlockK + dot] * b;
    }
    __syncthreads();
  }
  const int col = block_col + thread_col;
  if (col >= args.n) return;
#pragma unroll
  for (int r = 0; r < kThreadM; ++r) {
    const int row = block_row + thread_row * kThreadM + r;
    if (row < args.m) {
      detail::StoreOutput(p.c + static_cast<int64_t>(row) * args.ldc + col,
                          acc[r], args.alpha, args.beta);
    }
  }
}

// The chapter's parameters: 64 x 64 block tile, K slices of 8, 8 rows per
// thread.
constexpr int kBlockM = 64, kBlockN = 64, kBlockK = 8, kThreadM = 8;

}  // namespace

cudaError_t LaunchSgemm1dRegisterTiling(const SgemmArgs& args,
                                        cudaStream_t stream) {
  return detail::ForEachBatchChunk(args, [&](const SgemmArgs& chunk) {
    const dim3 block((kBlockM * kBlockN) / kThreadM);
    const dim3 grid(CeilDiv(chunk.n, kBlockN), CeilDiv(chunk.m, kBlockM),
                    chunk.batch_count);
    detail::DispatchTransposes(chunk, [&](auto trans_a, auto trans_b) {
      Sgemm1dRegisterTilingKernel<kBlockM, kBlockN, kBlockK, kThreadM,
                                  decltype(trans_a)::value,
                                  decltype(trans_b)::value>
          <<<grid, block, 0, stream>>>(chunk);
    });
  });
}

}  // namespace gemm::kernels
