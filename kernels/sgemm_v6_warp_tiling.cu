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
// the alignment fallback (kVectorAccess = false) are v5's.
#include <cstdint>

#include "kernels/sgemm_common.cuh"
#include "kernels/sgemm_launchers.h"

namespace gemm::kernels {
namespace {

using detail::BatchMember;
using detail::CeilDiv;
using detail::FragmentIterator;
using detail::LoadLanes;
using detail::StoreOutputRow4;

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
  // A lane's thread tile, and how the 32 lanes tile a warp's sub-tile.
  constexpr int kThreadM = 4, kThreadN = 4;
  constexpr int kLanesM = 8, kLanesN = 4;
  constexpr int kSubM = kLanesM * kThreadM, kSubN = kLanesN * kThreadN;
  constexpr int kIterM = kWarpM / kSubM, kIterN = kWarpN / kSubN;
  constexpr int kWarpsN = kBlockN / kWarpN;
  constexpr int kThreads = (kBlockM / kWarpM) * kWarpsN * 32;
  static_assert(kLanesM * kLanesN == 32, "a warp is 32 lanes");
  static_assert(kWarpM % kSubM == 0 && kWarpN % kSubN == 0,
                "sub-tiles divide the warp tile");
  static_assert(
      kBlockM * kBlockK / 4 == kThreads && kBlockK * kBlockN / 4 == kThreads,
      "one float4 of each tile per thread per load");
  __shared__ __align__(
      16) float tile_a[kBlockK * kBlockM];  // transposed: [k][m]
  __shared__ __align__(16) float tile_b[kBlockK * kBlockN];  // [k][n]
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  // First row and column of this lane's first thread tile in the block tile.
  const int warp_row = (warp / kWarpsN) * kWarpM,
            warp_col = (warp % kWarpsN) * kWarpN;
  const int lane_row = warp_row + (lane % kLanesM) * kThreadM,
            lane_col = warp_col + (lane / kLanesM) * kThreadN;
  const int block_row = blockIdx.y * kBlockM, block_col = blockIdx.x * kBlockN;
  const BatchMember p = detail::SelectBatchMember(args);

  // Loading is v5's: one float4 of each tile per thread per K slice.
  const int a_m = kTransA ? (tid % (kBlockM / 4)) * 4 : tid / (kBlockK / 4);
  const int a_k = kTransA ? tid / (kBlockM / 4) : (tid % (kBlockK / 4)) * 4;
  const int b_k = kTransB ? (tid % (kBlockK / 4)) * 4 : tid / (kBlockN / 4);
  const int b_n = kTransB ? tid / (kBlockK / 4) : (tid % (kBlockN / 4)) * 4;
  FragmentIterator frag_iter_a(p.a, args.lda, !kTransA, block_row + a_m, args.m,
                               a_k, kBlockK);
  FragmentIterator frag_iter_b(p.b, args.ldb, kTransB, block_col + b_n, args.n,
                               b_k, kBlockK);

  // acc[im][in][m][n]: sub-tile (im, in), row m and column n of the lane's
  // thread tile in it.
  float acc[kIterM][kIterN][kThreadM][kThreadN] = {};
  float4 frag_a[kIterM], frag_b[kIterN];
  auto multiply_tile = [&](const float4& a4, const float4& b4) {
    if (kTransA) {
      *reinterpret_cast<float4*>(&tile_a[a_k * kBlockM + a_m]) = a4;
    } else {
      tile_a[(a_k + 0) * kBlockM + a_m] = a4.x;
      tile_a[(a_k + 1) * kBlockM + a_m] = a4.y;
      tile_a[(a_k + 2) * kBlockM + a_m] = a4.z;
      tile_a[(a_k + 3) * kBlockM + a_m] = a4.w;
    }
    if (kTransB) {
      tile_b[(b_k + 0) * kBlockN + b_n] = b4.x;
      tile_b[(b_k + 1) * kBlockN + b_n] = b4.y;
      tile_b[(b_k + 2) * kBlockN + b_n] = b4.z;
      tile_b[(b_k + 3) * kBlockN + b_n] = b4.w;
    } else {
      *reinterpret_cast<float4*>(&tile_b[b_k * kBlockN + b_n]) = b4;
    }
    __syncthreads();
#pragma unroll
    for (int dot = 0; dot < kBlockK; ++dot) {
#pragma unroll
      for (int im = 0; im < kIterM; ++im) {
        frag_a[im] = *reinterpret_cast<const float4*>(
            &tile_a[dot * kBlockM + lane_row + im * kSubM]);
      }
#pragma unroll
      for (int in = 0; in < kIterN; ++in) {
        frag_b[in] = *reinterpret_cast<const float4*>(
            &tile_b[dot * kBlockN + lane_col + in * kSubN]);
      }
#pragma unroll
      for (int im = 0; im < kIterM; ++im) {
        const float a[4] = {frag_a[im].x, frag_a[im].y, frag_a[im].z,
                            frag_a[im].w};
#pragma unroll
        for (int in = 0; in < kIterN; ++in) {
          const float b[4] = {frag_b[in].x, frag_b[in].y, frag_b[in].z,
                              frag_b[in].w};
#pragma unroll
          for (int m = 0; m < kThreadM; ++m) {
#pragma unroll
            for (int n = 0; n < kThreadN; ++n) acc[im][in][m][n] += a[m] * b[n];
          }
        }
      }
    }
    __syncthreads();
  };

  const int full_tiles = args.k / kBlockK;
  const bool block_inside =
      block_row + kBlockM <= args.m && block_col + kBlockN <= args.n;
  if (kVectorAccess && block_inside) {
    for (int t = 0; t < full_tiles; ++t) {
      const float4 a4 = *reinterpret_cast<const float4*>(frag_iter_a.ptr);
      const float4 b4 = *reinterpret_cast<const float4*>(frag_iter_b.ptr);
      frag_iter_a.ptr += frag_iter_a.step;
      frag_iter_b.ptr += frag_iter_b.step;
      multiply_tile(a4, b4);
    }
  } else {
    for (int t = 0; t < full_tiles; ++t) {
      const float4 a4 =
          LoadLanes<kVectorAccess>(frag_iter_a.ptr, frag_iter_a.full_tile);
      const float4 b4 =
          LoadLanes<kVectorAccess>(frag_iter_b.ptr, frag_iter_b.full_tile);
      frag_iter_a.ptr += frag_iter_a.step;
      frag_iter_b.ptr += frag_iter_b.step;
      multiply_tile(a4, b4);
    }
  }
  if (const int k0 = full_tiles * kBlockK; k0 < args.k) {
    multiply_tile(LoadLanes<kVectorAccess>(frag_iter_a.ptr,
                                           frag_iter_a.PartialTile(k0, args.k)),
                  LoadLanes<kVectorAccess>(
                      frag_iter_b.ptr, frag_iter_b.PartialTile(k0, args.k)));
  }

#pragma unroll
  for (int im = 0; im < kIterM; ++im) {
#pragma unroll
    for (int m = 0; m < kThreadM; ++m) {
      const int row = block_row + lane_row + im * kSubM + m;
      if (row >= args.m) continue;
#pragma unroll
      for (int in = 0; in < kIterN; ++in) {
        const int col = block_col + lane_col + in * kSubN;
        StoreOutputRow4<kVectorAccess>(
            p.c + static_cast<int64_t>(row) * args.ldc + col, args.n - col,
            acc[im][in][m], args.alpha, args.beta);
      }
    }
  }
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
