// The teaching road (v0..v5): kept as the chapter wrote it, each file one
// step; the service's kernels start at v6 (sgemm_warp_tile.cuh).
//
// v4, two-dimensional register tiling: a block owns a 128 x 128 tile of C and
// walks K in slices of 8; each of its 256 threads computes an 8 x 8 thread
// tile as a sum of outer products, so 16 shared-memory reads feed 64
// multiply-adds (8 times v2's ratio).
#include "kernels/sgemm_common.cuh"
#include "kernels/sgemm_launchers.h"

namespace gemm::kernels {
namespace {

using detail::BatchMember;
using detail::CeilDiv;

template <int kBlockM,   // block tile rows (of C)
          int kBlockN,   // block tile columns (of C)
          int kBlockK,   // K slice staged in shared memory per step
          int kThreadM,  // thread tile rows
          int kThreadN,  // thread tile columns
          bool kTransA,  // A is stored transposed (k x m)
          bool kTransB>  // B is stored transposed (n x k)
__global__ void __launch_bounds__((kBlockM * kBlockN) / (kThreadM * kThreadN))
    Sgemm2dRegisterTilingKernel(SgemmArgs args) {
  constexpr int kThreads = (kBlockM * kBlockN) / (kThreadM * kThreadN);
  __shared__ float tile_a[kBlockM * kBlockK];  // [m][k]
  __shared__ float tile_b[kBlockK * kBlockN];  // [k][n]
  const int tid = threadIdx.x;
  const int thread_col = tid % (kBlockN / kThreadN),
            thread_row = tid / (kBlockN / kThreadN);
  const int block_row = blockIdx.y * kBlockM, block_col = blockIdx.x * kBlockN;
  const BatchMember p = detail::SelectBatchMember(args);

  float acc[kThreadM][kThreadN] = {{0.f}};
  float frag_a[kThreadM], frag_b[kThreadN];
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
#pragma unroll
      for (int i = 0; i < kThreadM; ++i)
        frag_a[i] = tile_a[(thread_row * kThreadM + i) * kBlockK + dot];
#pragma unroll
      for (int i = 0; i < kThreadN; ++i)
        frag_b[i] = tile_b[dot * kBlockN + thread_col * kThreadN + i];
#pragma unroll
      for (int m = 0; m < kThreadM; ++m) {
#pragma unroll
        for (int n = 0; n < kThreadN; ++n) acc[m][n] += frag_a[m] * frag_b[n];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int m = 0; m < kThreadM; ++m) {
    const int row = block_row + thread_row * kThreadM + m;
#pragma unroll
    for (int n = 0; n < kThreadN; ++n) {
      const int col = block_col + thread_col * kThreadN + n;
      if (row < args.m && col < args.n) {
        detail::StoreOutput(p.c + static_cast<int64_t>(row) * args.ldc + col,
                            acc[m][n], args.alpha, args.beta);
      }
    }
  }
}

// The chapter's parameters: 128 x 128 block tile, K slices of 8, 8 x 8 per
// thread.
constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 8, kThreadM = 8,
              kThreadN = 8;

}  // namespace

cudaError_t LaunchSgemm2dRegisterTiling(const SgemmArgs& args,
                                        cudaStream_t stream) {
  return detail::ForEachBatchChunk(args, [&](const SgemmArgs& chunk) {
    const dim3 block((kBlockM * kBlockN) / (kThreadM * kThreadN));
    const dim3 grid(CeilDiv(chunk.n, kBlockN), CeilDiv(chunk.m, kBlockM),
                    chunk.batch_count);
    detail::DispatchTransposes(chunk, [&](auto trans_a, auto trans_b) {
      Sgemm2dRegisterTilingKernel<kBlockM, kBlockN, kBlockK, kThreadM, kThreadN,
                                  decltype(trans_a)::value,
                                  decltype(trans_b)::value>
          <<<grid, block, 0, stream>>>(chunk);
    });
  });
}

}  // namespace gemm::kernels
