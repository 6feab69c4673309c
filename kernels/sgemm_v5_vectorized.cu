// The teaching road (v0..v5): kept as the chapter wrote it, each file one
// step; the service's kernels start at v6 (sgemm_warp_tile.cuh).
//
// v5, vectorized access: v4's tiling (128 x 128 block tile, K slices of 8,
// 8 x 8 thread tile, 256 threads) with two changes. op(A)'s tile is stored
// transposed in shared memory ([k][m]), so a thread's 8 A values are
// contiguous and come in two 16-byte reads, like B's; and global memory is
// read and written in float4s, a quarter of the load/store instructions.
//
// 16-byte global access needs 16-byte aligned pointers and leading dimensions
// (and batch strides) that are multiples of 4. Where a problem lacks that,
// the launcher picks the kVectorAccess = false instantiation: the same kernel
// with each float4 of global memory read or written as four scalars. At the
// matrix's edges a float4 that is only partly inside moves element by
// element. Blocks whose whole tile lies inside C run the chapter's loop
// unchanged (unconditional float4 loads); edge blocks run a masked copy of
// it, and every block finishes a partial last K tile with K checked lane by
// lane (the split into full and edge tiles that the chapter's exercise 2
// mentions; docs/reference/kernels.md has what each variant cost). The
// predicated float4 loads and stores this needs (LoadLanes, FragmentIterator,
// StoreOutputRow4) live in sgemm_common.cuh, so that this file differs from
// v4 by the chapter's idea only.
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
    int kThreadM,        // thread tile rows
    int kThreadN,        // thread tile columns
    bool kTransA,        // A is stored transposed (k x m)
    bool kTransB,        // B is stored transposed (n x k)
    bool kVectorAccess>  // global memory moves in float4s (else in scalars)
__global__ void __launch_bounds__((kBlockM * kBlockN) / (kThreadM * kThreadN))
    SgemmVectorizedKernel(SgemmArgs args) {
  constexpr int kThreads = (kBlockM * kBlockN) / (kThreadM * kThreadN);
  static_assert(
      kBlockM * kBlockK / 4 == kThreads && kBlockK * kBlockN / 4 == kThreads,
      "one float4 of each tile per thread per load");
  static_assert(kThreadM % 4 == 0 && kThreadN % 4 == 0,
                "thread tiles are read in float4s");
  __shared__ __align__(
      16) float tile_a[kBlockK * kBlockM];  // transposed: [k][m]
  __shared__ __align__(16) float tile_b[kBlockK * kBlockN];  // [k][n]
  const int tid = threadIdx.x;
  const int thread_col = tid % (kBlockN / kThreadN),
            thread_row = tid / (kBlockN / kThreadN);
  const int block_row = blockIdx.y * kBlockM, block_col = blockIdx.x * kBlockN;
  const BatchMember p = detail::SelectBatchMember(args);

  // Where this thread's float4 of each tile sits, in op() coordinates (m or
  // n, and k within the tile): the four lanes run along the stored matrix's
  // rows, which are op(A)'s k (A as is) or m (A transposed), and op(B)'s n
  // (B as is) or k (B transposed).
  const int a_m = kTransA ? (tid % (kBlockM / 4)) * 4 : tid / (kBlockK / 4);
  const int a_k = kTransA ? tid / (kBlockM / 4) : (tid % (kBlockK / 4)) * 4;
  const int b_k = kTransB ? (tid % (kBlockK / 4)) * 4 : tid / (kBlockN / 4);
  const int b_n = kTransB ? tid / (kBlockK / 4) : (tid % (kBlockN / 4)) * 4;
  FragmentIterator frag_iter_a(p.a, args.lda, !kTransA, block_row + a_m, args.m,
                               a_k, kBlockK);
  FragmentIterator frag_iter_b(p.b, args.ldb, kTransB, block_col + b_n, args.n,
                               b_k, kBlockK);

  float acc[kThreadM][kThreadN] = {{0.f}};
  float frag_a[kThreadM], frag_b[kThreadN];
  // Stages one K tile in shared memory and accumulates its outer products.
  auto multiply_tile = [&](const float4& a4, const float4& b4) {
    if (kTransA) {  // the four run along m: one 16-byte store
      *reinterpret_cast<float4*>(&tile_a[a_k * kBlockM + a_m]) = a4;
    } else {  // the four run along k: transpose on the way in
      tile_a[(a_k + 0) * kBlockM + a_m] = a4.x;
      tile_a[(a_k + 1) * kBlockM + a_m] = a4.y;
      tile_a[(a_k + 2) * kBlockM + a_m] = a4.z;
      tile_a[(a_k + 3) * kBlockM + a_m] = a4.w;
    }
    if (kTransB) {  // the four run along k
      tile_b[(b_k + 0) * kBlockN + b_n] = b4.x;
      tile_b[(b_k + 1) * kBlockN + b_n] = b4.y;
      tile_b[(b_k + 2) * kBlockN + b_n] = b4.z;
      tile_b[(b_k + 3) * kBlockN + b_n] = b4.w;
    } else {  // the four run along n
      *reinterpret_cast<float4*>(&tile_b[b_k * kBlockN + b_n]) = b4;
    }
    __syncthreads();
#pragma unroll
    for (int dot = 0; dot < kBlockK; ++dot) {
#pragma unroll
      for (int i = 0; i < kThreadM; i += 4) {
        *reinterpret_cast<float4*>(&frag_a[i]) =
            *reinterpret_cast<const float4*>(
                &tile_a[dot * kBlockM + thread_row * kThreadM + i]);
      }
#pragma unroll
      for (int i = 0; i < kThreadN; i += 4) {
        *reinterpret_cast<float4*>(&frag_b[i]) =
            *reinterpret_cast<const float4*>(
                &tile_b[dot * kBlockN + thread_col * kThreadN + i]);
      }
#pragma unroll
      for (int m = 0; m < kThreadM; ++m) {
#pragma unroll
        for (int n = 0; n < kThreadN; ++n) acc[m][n] += frag_a[m] * frag_b[n];
      }
    }
    __syncthreads();
  };

  const int full_tiles = args.k / kBlockK;
  const bool block_inside =
      block_row + kBlockM <= args.m && block_col + kBlockN <= args.n;
  if (kVectorAccess && block_inside) {
    // Every fragment of every whole K tile is inside: the chapter's loop, two
    // unconditional 16-byte loads per tile. (Running every block through the
    // masked loop below cost 11% at 4096^3.)
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
  if (const int k0 = full_tiles * kBlockK;
      k0 < args.k) {  // the partial last K tile
    multiply_tile(LoadLanes<kVectorAccess>(frag_iter_a.ptr,
                                           frag_iter_a.PartialTile(k0, args.k)),
                  LoadLanes<kVectorAccess>(
                      frag_iter_b.ptr, frag_iter_b.PartialTile(k0, args.k)));
  }

#pragma unroll
  for (int m = 0; m < kThreadM; ++m) {
    const int row = block_row + thread_row * kThreadM + m;
    if (row >= args.m) break;
#pragma unroll
    for (int n = 0; n < kThreadN; n += 4) {
      const int col = block_col + thread_col * kThreadN + n;
      StoreOutputRow4<kVectorAccess>(
          p.c + static_cast<int64_t>(row) * args.ldc + col, args.n - col,
          acc[m] + n, args.alpha, args.beta);
    }
  }
}

// The chapter's parameters: 128 x 128 block tile, K slices of 8, 8 x 8 per
// thread.
constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 8, kThreadM = 8,
              kThreadN = 8;

bool Aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

}  // namespace

bool SgemmVectorAccessAllowed(const SgemmArgs& args) {
  const bool reads_ab = args.k > 0;
  const bool batched = args.batch_count > 1;
  return (!reads_ab ||
          (Aligned16(args.a) && Aligned16(args.b) && args.lda % 4 == 0 &&
           args.ldb % 4 == 0 &&
           (!batched || (args.stride_a % 4 == 0 && args.stride_b % 4 == 0)))) &&
         Aligned16(args.c) && args.ldc % 4 == 0 &&
         (!batched || args.stride_c % 4 == 0);
}

cudaError_t LaunchSgemmVectorized(const SgemmArgs& args, cudaStream_t stream) {
  const bool vector_access = SgemmVectorAccessAllowed(args);
  return detail::ForEachBatchChunk(args, [&](const SgemmArgs& chunk) {
    const dim3 block((kBlockM * kBlockN) / (kThreadM * kThreadN));
    const dim3 grid(CeilDiv(chunk.n, kBlockN), CeilDiv(chunk.m, kBlockM),
                    chunk.batch_count);
    detail::DispatchTransposes(chunk, [&](auto trans_a, auto trans_b) {
      constexpr bool kTransA = decltype(trans_a)::value,
                     kTransB = decltype(trans_b)::value;
      if (vector_access) {
        SgemmVectorizedKernel<kBlockM, kBlockN, kBlockK, kThreadM, kThreadN,
                              kTransA, kTransB, true>
            <<<grid, block, 0, stream>>>(chunk);
      } else {
        SgemmVectorizedKernel<kBlockM, kBlockN, kBlockK, kThreadM, kThreadN,
                              kTransA, kTransB, false>
            <<<grid, block, 0, stream>>>(chunk);
      }
    });
  });
}

}  // namespace gemm::kernels
