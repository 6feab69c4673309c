// v10, a multi-stage cp.async pipeline: v6's warp tiles, fed by the copy
// engine of sm_80 and later instead of by registers. Each thread issues
// `cp.async` copies from global straight into shared memory for the K slice
// kStages - 1 steps ahead of the one being multiplied, so up to kStages - 1
// slices are in flight while the warps compute; a slice costs one
// __syncthreads, and no register holds data on its way to shared memory (v7
// held two float4s per thread for that, which capped what else it could
// keep).
//
// Shared memory holds each operand as [k][m or n], rows padded by 4 floats.
// An operand whose rows run along m or n in memory (A transposed, B as is)
// is copied 16 bytes at a time along its rows. One whose rows run along K
// (A as is, B transposed) must be transposed on the way, so it is copied a
// word at a time, each warp covering 8 k by 4 rows: with the padding its 32
// words land on 32 distinct banks (without padding every k row starts on
// bank 0 and the 8 k of a warp's stores fall on the same bank: the 2-way to
// 8-way conflicts of v5-v8's transposed stores). The copies zero-fill what
// lies outside the matrix (cp.async's source size), so the math needs no
// bounds checks; a slice wholly inside the matrix is copied without any.
// Without 16-byte alignment (kVectorAccess = false) every copy is a word.
//
// The pipeline, the copies and the kernel are in sgemm_cp_async.cuh (v11
// shares the first two; sgemm_v10_tiles.cu sweeps the kernel's tile
// configurations); the multiply, the thread tiles and the epilogue are v6's.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/sgemm_common.cuh"
#include "kernels/sgemm_cp_async.cuh"
#include "kernels/sgemm_launchers.h"

namespace gemm::kernels {

using detail::LaunchCpAsync;

// 128 x 128 blocks of 8 warps of 64 x 32 (v6's), K slices of 16, 3 stages.
cudaError_t LaunchSgemmCpAsync(const SgemmArgs& args, cudaStream_t stream) {
  return LaunchCpAsync<128, 128, 16, 64, 32, 3, 2>(args, stream);
}

// 64 x 64 blocks of 4 warps of 32 x 32, K slices of 16, 4 stages: four times
// the blocks, for shapes whose 128 x 128 grid leaves SMs idle.
cudaError_t LaunchSgemmCpAsyncSmallTiles(const SgemmArgs& args,
                                         cudaStream_t stream) {
  return LaunchCpAsync<64, 64, 16, 32, 32, 4, 4>(args, stream);
}

}  // namespace gemm::kernels
