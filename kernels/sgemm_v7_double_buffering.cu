// v7, double buffering: v6 with two shared-memory stages. While the block
// computes on one stage, each thread's loads of the next K slice are in
// flight into registers, and go into the other stage once the computing is
// done: a K slice costs one __syncthreads instead of two, and the global
// loads' latency hides behind the math instead of stalling it (the
// chapter's exercise 3, on top of warp tiling). __launch_bounds__ asks for
// two blocks per SM, so that the prefetch registers do not cost occupancy.
//
// Loads, tiles, the inside/edge split and the alignment fallback are v6's:
// the main loop of sgemm_warp_tile.cuh with two stages.
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
__global__ void __launch_bounds__((kBlockM / kWarpM) * (kBlockN / kWarpN) * 32,
                                  2)
    SgemmDoubleBufferingKernel(SgemmArgs args) {
  // Two shared-memory stages: the next slice loads while this one multiplies.
  using Loop =
      detail::RegisterStagedMainloop<kBlockM, kBlockN, kBlockK, kWarpM, kWarpN,
                                     2, kTransA, kTransB, kVectorAccess>;
  __shared__ __align__(16) float tiles[Loop::kSharedFloats];
  const detail::BatchMember p = detail::SelectBatchMember(args);
  Loop loop(blockIdx.y * kBlockM, blockIdx.x * kBlockN);
  loop.Accumulate(args, p, 0, args.k, tiles);
  loop.template Store<kVectorAccess>(args, p.c);
}

// Launches the kernel with one tile configuration (K slices of 8).
template <int kBlockM,  // block tile rows
          int kBlockN,  // block tile columns
          int kWarpM,   // warp tile rows
          int kWarpN>   // warp tile columns
cudaError_t Launch(const SgemmArgs& args, cudaStream_t stream) {
  constexpr int kBlockK = 8;
  const bool vector_access = SgemmVectorAccessAllowed(args);
  return detail::ForEachBatchChunk(args, [&](const SgemmArgs& chunk) {
    const dim3 block((kBlockM / kWarpM) * (kBlockN / kWarpN) * 32);
    const dim3 grid(CeilDiv(chunk.n, kBlockN), CeilDiv(chunk.m, kBlockM),
                    chunk.batch_count);
    detail::DispatchTransposes(chunk, [&](auto trans_a, auto trans_b) {
      constexpr bool kTransA = decltype(trans_a)::value,
                     kTransB = decltype(trans_b)::value;
      if (vector_access) {
        SgemmDoubleBufferingKernel<kBlockM, kBlockN, kBlockK, kWarpM, kWarpN,
                                   kTransA, kTransB, true>
            <<<grid, block, 0, stream>>>(chunk);
      } else {
        SgemmDoubleBufferingKernel<kBlockM, kBlockN, kBlockK, kWarpM, kWarpN,
                                   kTransA, kTransB, false>
            <<<grid, block, 0, stream>>>(chunk);
      }
    });
  });
}

}  // namespace

// v6's tiles: 128 x 128 blocks of 8 warps of 64 x 32.
cudaError_t LaunchSgemmDoubleBuffering(const SgemmArgs& args,
                                       cudaStream_t stream) {
  return Launch<128, 128, 64, 32>(args, stream);
}

// 64 x 64 blocks of 4 warps of 32 x 32: four times the blocks, for shapes
// whose 128 x 128 grid leaves SMs idle (1024^3 has 64 tiles for 132 SMs).
cudaError_t LaunchSgemmDoubleBufferingSmallTiles(const SgemmArgs& args,
                                                 cudaStream_t stream) {
  return Launch<64, 64, 32, 32>(args, stream);
}

}  // namespace gemm::kernels
