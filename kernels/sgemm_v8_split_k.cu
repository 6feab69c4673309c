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
// fallback are v7's.
#include <algorithm>
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
    SgemmSplitKKernel(SgemmArgs args, int splits, int k_per_split) {
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
  // blockIdx.z: batch member * splits + split.
  const int64_t member = blockIdx.z / splits;
  const int split = blockIdx.z % splits;
  const BatchMember p{args.a + member * args.stride_a,
                      args.b + member * args.stride_b,
                      args.c + member * args.stride_c};
  // This block's K range; the iterators start at its first slice.
  const int k_begin = split * k_per_split;
  const int k_end = min(args.k, k_begin + k_per_split);

  // Loading is v5's: one float4 of each tile per thread per K slice.
  const int a_m = kTransA ? (tid % (kBlockM / 4)) * 4 : tid / (kBlockK / 4);
  const int a_k = kTransA ? tid / (kBlockM / 4) : (tid % (kBlockK / 4)) * 4;
  const int b_k = kTransB ? (tid % (kBlockK / 4)) * 4 : tid / (kBlockN / 4);
  const int b_n = kTransB ? tid / (kBlockK / 4) : (tid % (kBlockN / 4)) * 4;
  FragmentIterator frag_iter_a(p.a, args.lda, !kTransA, block_row + a_m, args.m,
                               k_begin + a_k, kBlockK);
  FragmentIterator frag_iter_b(p.b, args.ldb, kTransB, block_col + b_n, args.n,
                               k_begin + b_k, kBlockK);

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

  const int k_length = max(0, k_end - k_begin);
  const int full_tiles = k_length / kBlockK;
  const int tiles = full_tiles + (full_tiles * kBlockK < k_length ? 1 : 0);
  // The pipeline: slice t + 1 travels into registers while slice t is
  // multiplied, then goes into the other stage. `load_full` reads one whole
  // K slice's float4s; the partial last slice is read lane by lane.
  auto pipeline = [&](auto load_full) {
    auto load = [&](int t, float4& a4, float4& b4) {
      if (t < full_tiles) {
        load_full(a4, b4);
      } else {
        // The iterators' k already counts k_begin.
        const int k0 = full_tiles * kBlockK;
        a4 = LoadLanes<kVectorAccess>(frag_iter_a.ptr,
                                      frag_iter_a.PartialTile(k0, k_end));
        b4 = LoadLanes<kVectorAccess>(frag_iter_b.ptr,
                                      frag_iter_b.PartialTile(k0, k_end));
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
        float* c = p.c + static_cast<int64_t>(row) * args.ldc + col;
        if (splits == 1) {
          StoreOutputRow4<kVectorAccess>(c, args.n - col, acc[im][in][m],
                                         args.alpha, args.beta);
        } else {  // C already holds beta * C
#pragma unroll
          for (int n = 0; n < kThreadN; ++n) {
            if (col + n < args.n)
              atomicAdd(c + n, args.alpha * acc[im][in][m][n]);
          }
        }
      }
    }
  }
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
