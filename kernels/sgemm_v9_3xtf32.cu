// v9, Tensor Cores at float32 accuracy (3xTF32): v6's block tile, loads and
// warp tiles, with the multiply done by mma.sync on Tensor Cores instead of
// FMAs. Tensor Cores take TF32 (float32 with a 10-bit mantissa), so each
// float32 operand x is split into a TF32 high part big(x) = tf32(x) and a
// TF32 residual small(x) = tf32(x - big(x)); together they hold 21 of
// float32's 24 mantissa bits. Each product is then
//
//   a * b ~ big(a) * big(b) + big(a) * small(b) + small(a) * big(b)
//
// (the residuals' own product, about 2^-22 of a * b, is dropped), three
// Tensor Core products accumulated in float32, small terms first. This is
// CUTLASS's 3xTF32; its error stays at float32's level while the Tensor
// Cores' rate is several times the FMA units'.
//
// The warp's 64 x 32 tile is 4 x 4 mma tiles of m16n8k8. A K slice of 16,
// two k8 steps, lies between each pair of barriers; each thread loads two
// float4s of A and two of B for it. Each element is split once, as it is
// stored to shared memory (high parts and residuals in tiles of their
// own); each lane then loads its A fragments (4 per m16 tile) and B
// fragments (2 per n8 tile), both parts, and issues 3 mma per tile into a
// fresh accumulator, which it adds to its running sum with an ordinary
// float32 add. (The Tensor Cores truncate as they accumulate; a running
// sum kept in them drifts one way over a long K, to tens of times
// float32's error at K = 8192, where this rounds to nearest once per k8
// step.) The shared-memory tiles get 8 words of padding per k row, so that
// the fragment reads (a k row per quad of lanes, 8 rows of m or n apart)
// fall on 32 distinct banks. docs/reference/kernels.md has the measurements of
// each step.
//
// An infinite input has big(x) = x and no residual (small(x) = 0), so
// infinities propagate as in float32 arithmetic.
#include <cstdint>

#include "kernels/sgemm_common.cuh"
#include "kernels/sgemm_launchers.h"

namespace gemm::kernels {
namespace {

using detail::BatchMember;
using detail::CeilDiv;
using detail::FragmentIterator;
using detail::LoadLanes;
using detail::SplitTf32;
using detail::StoreOutput;

// acc += A * B for one m16n8k8 tile (row-major A, column-major B fragments).
__device__ __forceinline__ void MmaTf32(float (&acc)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <bool kTransA, bool kTransB, bool kVectorAccess>
__global__ void __launch_bounds__(256, 2)  // two blocks per SM: 128 registers
    Sgemm3xTf32Kernel(SgemmArgs args) {
  // A K slice of 16: two k8 steps of the mma per pair of barriers.
  constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 16, kHalfK = 8;
  constexpr int kWarpM = 64, kWarpN = 32, kWarpsN = kBlockN / kWarpN;
  constexpr int kThreads = 256;
  constexpr int kMmaM = 16, kMmaN = 8;
  constexpr int kTilesM = kWarpM / kMmaM, kTilesN = kWarpN / kMmaN;
  // Padded k rows: fragment reads without bank conflicts.
  constexpr int kStrideA = kBlockM + 8, kStrideB = kBlockN + 8;
  static_assert(
      kBlockM * kHalfK / 4 == kThreads && kHalfK * kBlockN / 4 == kThreads,
      "one float4 of each half tile per thread per load");
  // The tiles' TF32 high parts and residuals (bit patterns): A as [k][m],
  // B as [k][n].
  __shared__ __align__(16) uint32_t tile_a_big[kBlockK * kStrideA];
  __shared__ __align__(16) uint32_t tile_a_small[kBlockK * kStrideA];
  __shared__ __align__(16) uint32_t tile_b_big[kBlockK * kStrideB];
  __shared__ __align__(16) uint32_t tile_b_small[kBlockK * kStrideB];
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  // The mma fragment layout: a lane's group (row of A, column of B) and its
  // place in the group (column of A, row of B).
  const int group = lane / 4, in_group = lane % 4;
  const int warp_row = (warp / kWarpsN) * kWarpM,
            warp_col = (warp % kWarpsN) * kWarpN;
  const int block_row = blockIdx.y * kBlockM, block_col = blockIdx.x * kBlockN;
  const BatchMember p = detail::SelectBatchMember(args);

  // v6's loads, twice: one float4 of each operand per thread for each half
  // (8 deep) of the K slice.
  const int a_m = kTransA ? (tid % (kBlockM / 4)) * 4 : tid / (kHalfK / 4);
  const int a_k = kTransA ? tid / (kBlockM / 4) : (tid % (kHalfK / 4)) * 4;
  const int b_k = kTransB ? (tid % (kHalfK / 4)) * 4 : tid / (kBlockN / 4);
  const int b_n = kTransB ? tid / (kHalfK / 4) : (tid % (kBlockN / 4)) * 4;
  // One iterator per operand; the second half's float4 is kHalfK further
  // along K, with the same lanes inside (but for the last, partial slice).
  FragmentIterator frag_iter_a(p.a, args.lda, !kTransA, block_row + a_m, args.m,
                               a_k, kBlockK);
  FragmentIterator frag_iter_b(p.b, args.ldb, kTransB, block_col + b_n, args.n,
                               b_k, kBlockK);
  const int64_t half_a = kTransA ? kHalfK * args.lda : kHalfK;
  const int64_t half_b = kTransB ? kHalfK : kHalfK * args.ldb;

  float acc[kTilesM][kTilesN][4] = {};
  // Splits a float4 of a tile into its TF32 parts, stored at `at` (and the
  // 3 floats after it when `vector`, else every `stride` floats).
  auto store_split = [](uint32_t* big, uint32_t* small, int at, int stride,
                        const float4& v) {
    const float lanes[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      SplitTf32(lanes[i], big[at + i * stride], small[at + i * stride]);
    }
  };
  auto multiply_tile = [&](const float4(&a4)[2], const float4(&b4)[2]) {
  // Each element is split once, as it is stored, rather than by every
  // warp that reads it.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int ak = (a_k + h * kHalfK) * kStrideA + a_m;
      const int bk = (b_k + h * kHalfK) * kStrideB + b_n;
      store_split(tile_a_big, tile_a_small, ak, kTransA ? 1 : kStrideA, a4[h]);
      store_split(tile_b_big, tile_b_small, bk, kTransB ? kStrideB : 1, b4[h]);
    }
    __syncthreads();
    // One k8 step at a time: unrolled, both steps' fragments would be live
    // at once and spill.
#pragma unroll 1
    for (int ks = 0; ks < kBlockK; ks += kHalfK) {
      uint32_t a_big[kTilesM][4], a_small[kTilesM][4];
      uint32_t b_big[kTilesN][2], b_small[kTilesN][2];
#pragma unroll
      for (int im = 0; im < kTilesM; ++im) {
        // a0 (row, k), a1 (row + 8, k), a2 (row, k + 4), a3 (row + 8, k + 4).
        const int at =
            (ks + in_group) * kStrideA + warp_row + im * kMmaM + group;
        const int offsets[4] = {0, 8, 4 * kStrideA, 4 * kStrideA + 8};
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          a_big[im][r] = tile_a_big[at + offsets[r]];
          a_small[im][r] = tile_a_small[at + offsets[r]];
        }
      }
#pragma unroll
      for (int in = 0; in < kTilesN; ++in) {
        // b0 (k, col), b1 (k + 4, col).
        const int at =
            (ks + in_group) * kStrideB + warp_col + in * kMmaN + group;
        b_big[in][0] = tile_b_big[at];
        b_small[in][0] = tile_b_small[at];
        b_big[in][1] = tile_b_big[at + 4 * kStrideB];
        b_small[in][1] = tile_b_small[at + 4 * kStrideB];
      }
#pragma unroll
      for (int im = 0; im < kTilesM; ++im) {
#pragma unroll
        for (int in = 0; in < kTilesN; ++in) {
          // The K slice's three products in a fresh accumulator, then added
          // to the running sum with float32's rounding to nearest: the Tensor
          // Cores' own accumulation truncates, which over a long K would
          // drift one way.
          float slice[4] = {0.f, 0.f, 0.f, 0.f};
          MmaTf32(slice, a_small[im], b_big[in]);
          MmaTf32(slice, a_big[im], b_small[in]);
          MmaTf32(slice, a_big[im], b_big[in]);
#pragma unroll
          for (int r = 0; r < 4; ++r) acc[im][in][r] += slice[r];
        }
      }
    }
    __syncthreads();
  };

  const int full_tiles = args.k / kBlockK;
  const bool block_inside =
      block_row + kBlockM <= args.m && block_col + kBlockN <= args.n;
  float4 a4[2], b4[2];
  if (kVectorAccess && block_inside) {
    for (int t = 0; t < full_tiles; ++t) {
      a4[0] = *reinterpret_cast<const float4*>(frag_iter_a.ptr);
      a4[1] = *reinterpret_cast<const float4*>(frag_iter_a.ptr + half_a);
      b4[0] = *reinterpret_cast<const float4*>(frag_iter_b.ptr);
      b4[1] = *reinterpret_cast<const float4*>(frag_iter_b.ptr + half_b);
      frag_iter_a.ptr += frag_iter_a.step;
      frag_iter_b.ptr += frag_iter_b.step;
      multiply_tile(a4, b4);
    }
  } else {
    for (int t = 0; t < full_tiles; ++t) {
      a4[0] = LoadLanes<kVectorAccess>(frag_iter_a.ptr, frag_iter_a.full_tile);
      a4[1] = LoadLanes<kVectorAccess>(frag_iter_a.ptr + half_a,
                                       frag_iter_a.full_tile);
      b4[0] = LoadLanes<kVectorAccess>(frag_iter_b.ptr, frag_iter_b.full_tile);
      b4[1] = LoadLanes<kVectorAccess>(frag_iter_b.ptr + half_b,
                                       frag_iter_b.full_tile);
      frag_iter_a.ptr += frag_iter_a.step;
      frag_iter_b.ptr += frag_iter_b.step;
      multiply_tile(a4, b4);
    }
  }
  if (const int k0 = full_tiles * kBlockK; k0 < args.k) {
    // Lanes past K read nothing (the pointer may then lie past the
    // operand's end, unread).
    a4[0] = LoadLanes<kVectorAccess>(frag_iter_a.ptr,
                                     frag_iter_a.PartialTile(k0, args.k));
    a4[1] = LoadLanes<kVectorAccess>(
        frag_iter_a.ptr + half_a, frag_iter_a.PartialTile(k0 + kHalfK, args.k));
    b4[0] = LoadLanes<kVectorAccess>(frag_iter_b.ptr,
                                     frag_iter_b.PartialTile(k0, args.k));
    b4[1] = LoadLanes<kVectorAccess>(
        frag_iter_b.ptr + half_b, frag_iter_b.PartialTile(k0 + kHalfK, args.k));
    multiply_tile(a4, b4);
  }

  // The accumulator layout: c0 (row, col), c1 (row, col + 1), c2 (row + 8,
  // col), c3 (row + 8, col + 1).
#pragma unroll
  for (int im = 0; im < kTilesM; ++im) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = block_row + warp_row + im * kMmaM + group + 8 * half;
      if (row >= args.m) continue;
      float* c_row = p.c + static_cast<int64_t>(row) * args.ldc;
#pragma unroll
      for (int in = 0; in < kTilesN; ++in) {
        const int col = block_col + warp_col + in * kMmaN + 2 * in_group;
        if (col < args.n) {
          StoreOutput(c_row + col, acc[im][in][2 * half], args.alpha,
                      args.beta);
        }
        if (col + 1 < args.n) {
          StoreOutput(c_row + col + 1, acc[im][in][2 * half + 1], args.alpha,
                      args.beta);
        }
      }
    }
  }
}

}  // namespace

cudaError_t LaunchSgemm3xTf32(const SgemmArgs& args, cudaStream_t stream) {
  const bool vector_access = SgemmVectorAccessAllowed(args);
  return detail::ForEachBatchChunk(args, [&](const SgemmArgs& chunk) {
    const dim3 block(256);
    const dim3 grid(CeilDiv(chunk.n, 128), CeilDiv(chunk.m, 128),
                    chunk.batch_count);
    detail::DispatchTransposes(chunk, [&](auto trans_a, auto trans_b) {
      constexpr bool kTransA = decltype(trans_a)::value,
                     kTransB = decltype(trans_b)::value;
      if (vector_access) {
        Sgemm3xTf32Kernel<kTransA, kTransB, true>
            <<<grid, block, 0, stream>>>(chunk);
      } else {
        Sgemm3xTf32Kernel<kTransA, kTransB, false>
            <<<grid, block, 0, stream>>>(chunk);
      }
    });
  });
}

}  // namespace gemm::kernels
