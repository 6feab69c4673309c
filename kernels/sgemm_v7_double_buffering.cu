// v7, double buffering: v6 with two shared-memory stages. While the block
// computes on one stage, each thread's loads of the next K slice are in
// flight into registers, and go into the other stage once the computing is
// done: a K slice costs one __syncthreads instead of two, and the global
// loads' latency hides behind the math instead of stalling it (the
// chapter's exercise 3, on top of warp tiling). __launch_bounds__ asks for
// two blocks per SM, so that the prefetch registers do not cost occupancy.
//
// Loads, tiles, the inside/edge split and the alignment fallback are v6's.
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
__global__ void __launch_bounds__((kBlockM / kWarpM) * (kBlockN / kWarpN) * 32,
                                  2)
    SgemmDoubleBufferingKernel(SgemmArgs args) {
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
  // Two stages of each tile: [stage][k][m] (A transposed) and [stage][k][n].
  __shared__ __align__(16) float tile_a[2][kBlockK * kBlockM];
  __shared__ __align__(16) float tile_b[2][kBlockK * kBlockN];
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
  // Stores this thread's float4 of each operand into `stage`.
  auto stage_in = [&](int stage, const float4& a4, const float4& b4) {
    float* a = tile_a[stage];
    float* b = tile_b[stage];
    if (kTransA) {
      *reinterpret_cast<float4*>(&a[a_k * kBlockM + a_m]) = a4;
    } else {
      a[(a_k + 0) * kBlockM + a_m] = a4.x;
      a[(a_k + 1) * kBlockM + a_m] = a4.y;
      a[(a_k + 2) * kBlockM + a_m] = a4.z;
      a[(a_k + 3) * kBlockM + a_m] = a4.w;
    }
    if (kTransB) {
      b[(b_k + 0) * kBlockN + b_n] = b4.x;
      b[(b_k + 1) * kBlockN + b_n] = b4.y;
      b[(b_k + 2) * kBlockN + b_n] = b4.z;
      b[(b_k + 3) * kBlockN + b_n] = b4.w;
    } else {
      *reinterpret_cast<float4*>(&b[b_k * kBlockN + b_n]) = b4;
    }
  };
  // Accumulates the outer products of the K slice in `stage`.
  auto compute = [&](int stage) {
    const float* a = tile_a[stage];
    const float* b = tile_b[stage];
#pragma unroll
    for (int dot = 0; dot < kBlockK; ++dot) {
#pragma unroll
      for (int im = 0; im < kIterM; ++im) {
        frag_a[im] = *reinterpret_cast<const float4*>(
            &a[dot * kBlockM + lane_row + im * kSubM]);
      }
#pragma unroll
      for (int in = 0; in < kIterN; ++in) {
        frag_b[in] = *reinterpret_cast<const float4*>(
            &b[dot * kBlockN + lane_col + in * kSubN]);
      }
#pragma unroll
      for (int im = 0; im < kIterM; ++im) {
        const float a4[4] = {frag_a[im].x, frag_a[im].y, frag_a[im].z,
                             frag_a[im].w};
#pragma unroll
        for (int in = 0; in < kIterN; ++in) {
          const float b4[4] = {frag_b[in].x, frag_b[in].y, frag_b[in].z,
                               frag_b[in].w};
#pragma unroll
          for (int m = 0; m < kThreadM; ++m) {
#pragma unroll
            for (int n = 0; n < kThreadN; ++n) {
              acc[im][in][m][n] += a4[m] * b4[n];
            }
          }
        }
      }
    }
  };

  const int full_tiles = args.k / kBlockK;
  const int tiles = full_tiles + (full_tiles * kBlockK < args.k ? 1 : 0);
  // The pipeline: slice t + 1 travels into registers while slice t is
  // multiplied, then goes into the other stage. `load_full` reads one whole
  // K slice's float4s; the partial last slice is read lane by lane.
  auto pipeline = [&](auto load_full) {
    auto load = [&](int t, float4& a4, float4& b4) {
      if (t < full_tiles) {
        load_full(a4, b4);
      } else {
        const int k0 = full_tiles * kBlockK;
        a4 = LoadLanes<kVectorAccess>(frag_iter_a.ptr,
                                      frag_iter_a.PartialTile(k0, args.k));
        b4 = LoadLanes<kVectorAccess>(frag_iter_b.ptr,
                                      frag_iter_b.PartialTile(k0, args.k));
      }
      frag_iter_a.ptr += frag_iter_a.step;
      frag_iter_b.ptr += frag_iter_b.step;
    };
    if (tiles == 0) return;
    float4 a4, b4;
    load(0, a4, b4);
    stage_in(0, a4, b4);
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
      const bool more = t + 1 < tiles;
      if (more) load(t + 1, a4, b4);
      compute(t & 1);
      // The other stage was last read in iteration t - 1, before its
      // closing barrier: free to overwrite.
      if (more) stage_in((t + 1) & 1, a4, b4);
      __syncthreads();
    }
  };
  const bool block_inside =
      block_row + kBlockM <= args.m && block_col + kBlockN <= args.n;
  if (kVectorAccess && block_inside) {
    // Whole slices of an inside block: two unconditional 16-byte loads.
    pipeline([&](float4& a4, float4& b4) {
      a4 = *reinterpret_cast<const float4*>(frag_iter_a.ptr);
      b4 = *reinterpret_cast<const float4*>(frag_iter_b.ptr);
    });
  } else {
    pipeline([&](float4& a4, float4& b4) {
      a4 = LoadLanes<kVectorAccess>(frag_iter_a.ptr, frag_iter_a.full_tile);
      b4 = LoadLanes<kVectorAccess>(frag_iter_b.ptr, frag_iter_b.full_tile);
    });
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
