// v10's tile configurations side by side, for gemm-bench --tile-sweep: the
// search for strict FP32 at 0.95x cuBLAS at 4096^3 and 8192^3 (issue 39),
// where v10 (128 x 128 blocks of 8 warps of 64 x 32, K slices of 16, 3
// stages, 2 blocks per SM) is latency-bound at 25% occupancy. What each
// configuration tries:
//   - K slices of 32: half the __syncthreads and pipeline waits per FLOP;
//   - 4 stages, or 2 with slices of 32: more, or fewer, slices in flight;
//   - 128 x 256 and 256 x 128 blocks of 64 x 64 warp tiles: twice the FLOPs
//     per shared-memory load (16 x 8 accumulators a thread), one block per
//     SM with the registers that takes;
//   - one block per SM with v10's tiles: registers freed for the compiler.
// The kernel and its launch are v10's (sgemm_cp_async.cuh), every transpose
// and access width. None of these is served:
// they are gemm-bench's alone (MakeV10TileSweepKernels, v10_tile_sweep.h),
// in a library the server does not link.
#include <cuda_runtime.h>

#include "kernels/sgemm_cp_async.cuh"
#include "kernels/sgemm_launchers.h"
#include "kernels/sgemm_v10_tiles.h"

namespace gemm::kernels {

using detail::LaunchCpAsync;

// Named by block tile (m x n x k), warp tile, stages and blocks per SM.
#define GEMM_V10_TILES(bm, bn, bk, wm, wn, stages, blocks)                  \
  {                                                                         \
    "v10t-" #bm "x" #bn "x" #bk "-w" #wm "x" #wn "-s" #stages "-b" #blocks, \
        LaunchCpAsync<bm, bn, bk, wm, wn, stages, blocks>                   \
  }

const TileSweepLauncher kV10TileSweep[] = {
    GEMM_V10_TILES(128, 128, 16, 64, 32, 3, 2),  // v10 itself: the yardstick
    GEMM_V10_TILES(128, 128, 16, 64, 32, 4, 2),
    GEMM_V10_TILES(128, 128, 32, 64, 32, 3, 2),
    GEMM_V10_TILES(128, 128, 32, 64, 32, 2, 2),
    GEMM_V10_TILES(128, 128, 16, 64, 32, 3, 1),
    GEMM_V10_TILES(256, 128, 16, 64, 32, 3, 1),
    GEMM_V10_TILES(256, 128, 32, 64, 32, 3, 1),
    GEMM_V10_TILES(128, 256, 16, 64, 64, 3, 1),
    GEMM_V10_TILES(256, 128, 16, 64, 64, 3, 1),
    GEMM_V10_TILES(128, 256, 32, 64, 64, 3, 1),
    GEMM_V10_TILES(128, 256, 16, 64, 64, 4, 1),
};

#undef GEMM_V10_TILES

const int kV10TileSweepSize =
    static_cast<int>(sizeof(kV10TileSweep) / sizeof(kV10TileSweep[0]));

}  // namespace gemm::kernels
