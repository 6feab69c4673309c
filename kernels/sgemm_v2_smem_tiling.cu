// The teaching road (v0..v5): kept as the chapter wrote it, each file one
// step; the service's kernels start at v6 (sgemm_warp_tile.cuh).
//
// v2, shared-memory tiling: each block owns a 32 x 32 tile of C and walks K
// in 32-wide slices; the block's 1024 threads stage one 32 x 32 tile of op(A)
// and one of op(B) in shared memory, so every element fetched from global
// memory is used 32 times. Out-of-range elements load as zeros (the chapter's
// exercise 2), so any M, N, K works.
#include "kernels/sgemm_common.cuh"
#include "kernels/sgemm_launchers.h"

namespace gemm::kernels {
namespace {

using detail::BatchMember;
using detail::CeilDiv;

template <int kTile,  // block tile edge: kTile x kTile of C, K sliced by kTile
          bool kTransA,  // A is stored transposed (k x m)
          bool kTransB>  // B is stored transposed (n x k)
__global__ void __launch_bounds__(kTile* kTile)
    SgemmSmemTilingKernel(SgemmArgs args) {
  __shared__ float tile_a[kTile][kTile];  // [m][k]
  __shared__ float tile_b[kTile][kTile];  // [k][n]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int tid = ty * kTile + tx;
  const int block_row = blockIdx.y * kTile, block_col = blockIdx.x * kTile;
  const BatchMember p = detail::SelectBatchMember(args);

  float acc = 0.f;
  for (int k0 = 0; k0 < args.k; k0 += kTile) {
    // Every thread takes part in the loads and both barriers, in range or not.
    detail::LoadTileScalar<kTile, kTile, kTile * kTile, kTransA>(
        p.a, args.lda, args.m, args.k, block_row, k0, tid,
        [&](int r, int c, float v) { tile_a[r][c] = v; });
    detail::LoadTileScalar<kTile, kTile, kTile * kTile, kTransB>(
        p.b, args.ldb, args.k, args.n, k0, block_col, tid,
        [&](int r, int c, float v) { tile_b[r][c] = v; });
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTile; ++k) acc += tile_a[ty][k] * tile_b[k][tx];
    __syncthreads();  // nobody refills the tiles while others still read them
  }
  const int row = block_row + ty, col = block_col + tx;
  if (row < args.m && col < args.n) {
    detail::StoreOutput(p.c + static_cast<int64_t>(row) * args.ldc + col, acc,
                        args.alpha, args.beta);
  }
}

// The chapter's tile: 32 x 32, one element per thread.
constexpr int kTile = 32;

}  // namespace

cudaError_t LaunchSgemmSmemTiling(const SgemmArgs& args, cudaStream_t stream) {
  return detail::ForEachBatchChunk(args, [&](const SgemmArgs& chunk) {
    const dim3 block(kTile, kTile);
    const dim3 grid(CeilDiv(chunk.n, kTile), CeilDiv(chunk.m, kTile),
                    chunk.batch_count);
    detail::DispatchTransposes(chunk, [&](auto trans_a, auto trans_b) {
      SgemmSmemTilingKernel<kTile, decltype(trans_a)::value,
                            decltype(trans_b)::value>
          <<<grid, block, 0, stream>>>(chunk);
    });
  });
}

}  // namespace gemm::kernels
