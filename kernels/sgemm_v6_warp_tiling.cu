// v6, warp tiling: v5's block tile, K slices and float4 loads, with the
// block's 128 x 128 tile of C divided among its warps first and then among
// each warp's threads (CUTLASS's hierarchy: block tile, warp tile, thread
// tile). Each of the 8 warps owns a 64 x 32 warp tile, which it sweeps as
// 2 x 2 sub-tiles of 32 x 16; in a sub-tile each lane owns a 4 x 4 thread
// tile, lanes laid 8 along m by 4 along n. A thread still computes 64
// outputs from 4 16-byte shared-memory reads per k, as in v5, but which
// reads a warp makes changes: in v5 a warp's 16 threads along n read B at a
// stride of 8 floats, so every quarter-warp's 16-byte reads fell twice on
// the same banks; here a quarter-warp reads 8 consecutive float4s of A (all
// 32 banks once) and one float4 of B (a broadcast), and neither conflicts.
// A warp's working set is also a contiguous 64 x 32 patch of C, so its
// shared-memory reads cover 96 floats per k where v5's cover 16 + 128.
//
// Loads, the split into inside and edge blocks, the partial last K tile and
// the alignment fallback (kVectorAccess = false) are v5's. The warp tile
// and the main loop (one stage) live in sgemm_warp_tile.cuh, shared with v7
// and v8.
#include <cstdint>

#include "kernels/sgemm_common.cuh"
#include "kernels/sgemm_launchers.h"
#include "kernels/sgemm_warp_tile.cuh"

namespace gemm::kernels {
namespace {

using detail::CeilDiv;

template <
    int kBlockM,         // block tile rows (of C)
    int kBlockN,         // block tile columns (of C)
    int kBlockK,         // K slice staged in shared memory per step
    int kWarpM,          // warp tile rows
    int kWarpN,          // warp tile columns
    bool kTransA,        // A is stored transposed (k x m)
    bool kTransB,        // B is stored transposed (n x k)
    bool kVectorAccess>  // global memory moves in float4s (else in scalars)
__global__ void __launch_bounds__((kBlockM / kWarpM) * (kBlockN / kWarpN) * 32)
    SgemmWarpTilingKernel(SgemmArgs args) {
  // One shared-memory stage: load a slice, store it, multiply it.
  using Loop =
      detail::RegisterStagedMainloop<kBlockM, kBlockN, kBlockK, kWarpM, kWarpN,
                                     1, kTransA, kTransB, kVectorAccess>;
  __shared__ __align__(16) float tiles[Loop::kSharedFloats];
  const detail::BatchMember p = detail::SelectBatchMember(args);
  Loop loop(blockIdx.y * kBlockM, blockIdx.x * kBlockN);
  loop.Accumulate(args, p, 0, args.k, tiles);
  loop.template Store<kVectorAccess>(args, p.c);
}

// v5's block tile and K slice; 8 warps of 64 x 32.
constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 8, kWarpM = 64,
              kWarpN = 32;

}  // namespace

cudaError_t LaunchSgemmWarpTiling(const SgemmArgs& args, cudaStream_t stream) {
  const bool vector_access = SgemmVectorAccessAllowed(args);
  return detail::ForEachBatchChunk(args, [&](const SgemmArgs& chunk) {
    const dim3 block((kBlockM / kWarpM) * (kBlockN / kWarpN) * 32);
    const dim3 grid(CeilDiv(chunk.n, kBlockN), CeilDiv(chunk.m, kBlockM),
                    chunk.batch_count);
    detail::DispatchTransposes(chunk, [&](auto trans_a, auto trans_b) {
      constexpr bool kTransA = decltype(trans_a)::value,
                     kTransB = decltype(trans_b)::value;
      if (vector_access) {
        SgemmWarpTilingKernel<kBlockM, kBlockN, kBlockK, kWarpM, kWarpN,
                              kTransA, kTransB, true>
            <<<grid, block, 0, stream>>>(chunk);
      } else {
        SgemmWarpTilingKernel<kBlockM, kBlockN, kBlockK, kWarpM, kWarpN,
                              kTransA, kTransB, false>
            <<<grid, block, 0, stream>>>(chunk);
      }
    });
  });
}

}  // namespace gemm::kernels
