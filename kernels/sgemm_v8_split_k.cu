// v8, split-K: v7's kernel with 64 x 64 tiles, where a problem has too few
// tiles of C to fill the GPU (skinny m or n, deep K: 16 x 4096 x 4096 has
// 64 tiles for 132 SMs) its K is cut into `splits` ranges, each computed by
// a block of its own, and the partial products are added into C with
// atomics after C has been scaled by beta once. The grid's z covers batch
// members times splits. With one split it is v7-64x64 with plain stores.
// Float addition is not associative, so a split result can differ from run
// to run in the last bits (within the float32 tolerance of the tests).
//
// Loads, tiles, the pipeline, the inside/edge split and the alignment
// fallback are v7's (sgemm_warp_tile.cuh's main loop over the block's K
// range).
#include <algorithm>
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
    SgemmSplitKKernel(SgemmArgs args, int splits, int k_per_split) {
  using Loop =
      detail::RegisterStagedMainloop<kBlockM, kBlockN, kBlockK, kWarpM, kWarpN,
                                     2, kTransA, kTransB, kVectorAccess>;
  __shared__ __align__(16) float tiles[Loop::kSharedFloats];
  // blockIdx.z: batch member * splits + split.
  const int64_t member = blockIdx.z / splits;
  const int split = blockIdx.z % splits;
  const detail::BatchMember p{args.a + member * args.stride_a,
                              args.b + member * args.stride_b,
                              args.c + member * args.stride_c};
  // This block's K range.
  const int k_begin = split * k_per_split;
  const int k_end = min(args.k, k_begin + k_per_split);
  Loop loop(blockIdx.y * kBlockM, blockIdx.x * kBlockN);
  loop.Accumulate(args, p, k_begin, k_end, tiles);
  loop.ForEachRow4(args.m, [&](int row, int col, const float* acc4) {
    float* c = p.c + static_cast<int64_t>(row) * args.ldc + col;
    if (splits == 1) {
      detail::StoreOutputRow4<kVectorAccess>(c, args.n - col, acc4, args.alpha,
                                             args.beta);
      return;
    }
    // C already holds beta * C: each split adds alpha times its part.
#pragma unroll
    for (int n = 0; n < Loop::kThreadN; ++n) {
      if (col + n < args.n) atomicAdd(c + n, args.alpha * acc4[n]);
    }
  });
}

// C = beta * C over every batch member (0 where beta is 0: C is not read),
// before the splits add into it.
__global__ void ScaleC(SgemmArgs args) {
  const int64_t per_member = static_cast<int64_t>(args.m) * args.n;
  const int64_t total = per_member * args.batch_count;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t member = i / per_member, within = i % per_member;
    float* c = args.c + member * args.stride_c + (within / args.n) * args.ldc +
               within % args.n;
    *c = args.beta == 0.f ? 0.f : args.beta * *c;
  }
}

constexpr int kBlockM = 64, kBlockN = 64, kBlockK = 8, kWarpM = 32, kWarpN = 32;
// Aim for two blocks per SM; a split gets at least this much of K.
constexpr int kMinSplitK = 256;

// How many K ranges: enough blocks for two per SM, each range at least
// kMinSplitK long and a whole number of K slices.
int SplitsFor(const SgemmArgs& args) {
  int device = 0, sms = 132;
  if (cudaGetDevice(&device) == cudaSuccess) {
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  }
  const int64_t tiles = int64_t{CeilDiv(args.m, kBlockM)} *
                        CeilDiv(args.n, kBlockN) * args.batch_count;
  const int64_t wanted =
      CeilDiv(2 * sms, static_cast<int>(std::min<int64_t>(tiles, 1 << 20)));
  const int64_t most = std::max(1, args.k / kMinSplitK);
  return static_cast<int>(std::clamp<int64_t>(wanted, 1, most));
}

}  // namespace

cudaError_t LaunchSgemmSplitK(const SgemmArgs& args, cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return cudaSuccess;
  const int splits = SplitsFor(args);
  // K ranges of whole slices.
  const int k_per_split =
      CeilDiv(CeilDiv(std::max(args.k, 1), splits), kBlockK) * kBlockK;
  const bool vector_access = SgemmVectorAccessAllowed(args);
  // The grid's z holds members times splits.
  const int members_per_launch = std::max(1, detail::kMaxGridZ / splits);
  for (int first = 0; first < args.batch_count; first += members_per_launch) {
    const SgemmArgs chunk = detail::BatchChunk(
        args, first, std::min(members_per_launch, args.batch_count - first));
    if (splits > 1) ScaleC<<<264, 256, 0, stream>>>(chunk);
    const dim3 block((kBlockM / kWarpM) * (kBlockN / kWarpN) * 32);
    const dim3 grid(CeilDiv(chunk.n, kBlockN), CeilDiv(chunk.m, kBlockM),
                    chunk.batch_count * splits);
    detail::DispatchTransposes(chunk, [&](auto trans_a, auto trans_b) {
      constexpr bool kTransA = decltype(trans_a)::value,
                     kTransB = decltype(trans_b)::value;
      if (vector_access) {
        SgemmSplitKKernel<kBlockM, kBlockN, kBlockK, kWarpM, kWarpN, kTransA,
                          kTransB, true>
            <<<grid, block, 0, stream>>>(chunk, splits, k_per_split);
      } else {
        SgemmSplitKKernel<kBlockM, kBlockN, kBlockK, kWarpM, kWarpN, kTransA,
                          kTransB, false>
            <<<grid, block, 0, stream>>>(chunk, splits, k_per_split);
      }
    });
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace gemm::kernels
