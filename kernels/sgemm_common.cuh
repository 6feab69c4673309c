// Device and launch helpers shared by the kernel files (sgemm_v*.cu): operand
// addressing for the transpose rule, batch-member selection, the epilogue,
// the zero-filling tile loader, predicated float4 loads and stores, and batch
// chunking. Included by .cu files only.
//
// The transpose rule: op(X)(row, col) is X[row * ld + col] when X is stored
// as is and X[col * ld + row] when stored transposed. Kernels take kTransA and
// kTransB as template parameters, so the choice changes only the address
// arithmetic of the global loads; the shared-memory layout and the math stay
// those of the chapter.
//
// Thread-safety: stateless.
//
//   DispatchTransposes(args, [&](auto trans_a, auto trans_b) {
//     MyKernel<decltype(trans_a)::value,
//     decltype(trans_b)::value><<<...>>>(args);
//   });
#ifndef GEMM_KERNELS_SGEMM_COMMON_CUH_
#define GEMM_KERNELS_SGEMM_COMMON_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/sgemm_args.h"

namespace gemm::kernels::detail {

// gridDim.z limit; larger batches are split into several launches.
inline constexpr int kMaxGridZ = 65535;

constexpr int CeilDiv(int a, int b) { return (a + b - 1) / b; }

// Address of op(X)(row, col) for X stored row-major with leading dimension ld.
template <bool kTrans>  // kTrans: X is stored transposed (op(X) = X^T)
__device__ __forceinline__ const float* OperandAddress(const float* x,
                                                       int64_t ld, int row,
                                                       int col) {
  return kTrans ? x + static_cast<int64_t>(col) * ld + row
                : x + static_cast<int64_t>(row) * ld + col;
}

template <bool kTrans>  // kTrans: X is stored transposed (op(X) = X^T)
__device__ __forceinline__ float LoadOperand(const float* x, int64_t ld,
                                             int row, int col) {
  return *OperandAddress<kTrans>(x, ld, row, col);
}

// The operands of the batch member this block works on (blockIdx.z).
struct BatchMember {
  const float* a;
  const float* b;
  float* c;
};

__device__ __forceinline__ BatchMember
SelectBatchMember(const SgemmArgs& args) {
  const int64_t z = blockIdx.z;
  return {args.a + z * args.stride_a, args.b + z * args.stride_b,
          args.c + z * args.stride_c};
}

// x's TF32 high part big = tf32(x) and residual small = tf32(x - big), as
// Tensor Core operands (bit patterns; TF32 rounded to nearest, ties away).
// 3xTF32 kernels (v9, v12) multiply big(a)big(b) + big(a)small(b) +
// small(a)big(b).
__device__ __forceinline__ void SplitTf32(float x, uint32_t& big,
                                          uint32_t& small) {
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(x));
  const float high = __uint_as_float(big);
  // x == high for infinities (and exact values): no residual, no inf - inf.
  const float rest = x == high ? 0.f : x - high;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(small) : "f"(rest));
}

// c = alpha * acc + beta * c. With beta == 0, C is never read: it may hold
// NaN, and 0 * NaN must not leak into the result.
__device__ __forceinline__ void StoreOutput(float* c, float acc, float alpha,
                                            float beta) {
  if (beta == 0.f) {
    *c = alpha * acc;
  } else {
    *c = alpha * acc + beta * *c;
  }
}

// Copies the kRows x kCols tile of op(X) whose corner is (row0, col0) into
// shared memory through store(r, c, value), writing 0 outside the rows x cols
// matrix (zeros add nothing to the dot products, so the math needs no bounds
// checks). Consecutive threads walk X's contiguous dimension, so a warp's
// loads coalesce whichever way X is stored.
template <int kRows,     // tile rows (of op(X))
          int kCols,     // tile columns (of op(X))
          int kThreads,  // threads of the block taking part, tid in [0,
                         // kThreads)
          bool kTrans,   // X is stored transposed
          typename Store>
__device__ __forceinline__ void LoadTileScalar(const float* x, int64_t ld,
                                               int rows, int cols, int row0,
                                               int col0, int tid,
                                               Store&& store) {
  static_assert((kRows * kCols) % kThreads == 0,
                "the tile must split evenly over the threads");
#pragma unroll
  for (int i = 0; i < kRows * kCols / kThreads; ++i) {
    const int e = tid + i * kThreads;
    const int r = kTrans ? e % kRows : e / kCols;
    const int c = kTrans ? e / kRows : e % kCols;
    const int row = row0 + r, col = col0 + c;
    store(r, c,
          (row < rows && col < cols) ? LoadOperand<kTrans>(x, ld, row, col)
                                     : 0.f);
  }
}

// Predicated float4 access to global memory (v5 and later): 16-byte loads
// and stores where a fragment lies wholly inside the matrix and the pointers
// allow it, lane by lane at the edges.

// Which of a fragment's 4 lanes lie inside the matrix. `all` is kept next to
// `count` rather than derived from it: ptxas 13.0 compiled `count == 4` after
// a clamp into a predicate that let an out-of-range 16-byte load through
// (compute-sanitizer, 2026-11-30; see docs/reference/kernels.md).
struct LaneMask {
  int count;  // lanes 0..count-1 are inside, 0..4
  bool all;   // count == 4
};

// Reads the lanes of `mask` from 4 consecutive floats at src (the rest read
// as 0): one 16-byte load when allowed and all 4 are inside.
template <bool kVectorAccess>  // src is 16-byte aligned
__device__ __forceinline__ float4 LoadLanes(const float* src, LaneMask mask) {
  if (kVectorAccess && mask.all) return *reinterpret_cast<const float4*>(src);
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  if (mask.count > 0) v.x = src[0];
  if (mask.count > 1) v.y = src[1];
  if (mask.count > 2) v.z = src[2];
  if (mask.count > 3) v.w = src[3];
  return v;
}

// One thread's float4 of an operand tile, walked along K one block-K step at
// a time. The four lanes are consecutive in memory (the stored matrix's
// row): they run along K when the operand is stored K-contiguous (A as is,
// B transposed), else along the operand's other index (m for A, n for B).
// Which lanes lie inside the matrix is worked out once: in whole K tiles it
// does not change; only the last, partial K tile checks K lane by lane.
struct FragmentIterator {
  const float* ptr;  // first lane, at the current K tile
  int64_t step;      // elements from one K tile to the next
  int k;             // K coordinate within the tile (of the first lane)
  bool lanes_along_k;
  bool index_inside;   // the non-K coordinate (m or n) of the first lane is
                       // inside
  LaneMask full_tile;  // lanes inside while the whole K tile is inside K

  // x: the operand; ld its leading dimension; index: the fragment's m (for A)
  // or n (for B), index_end: m or n.
  __device__ __forceinline__ FragmentIterator(const float* x, int64_t ld,
                                              bool k_contiguous, int index,
                                              int index_end, int k, int block_k)
      : ptr(k_contiguous ? x + static_cast<int64_t>(index) * ld + k
                         : x + static_cast<int64_t>(k) * ld + index),
        step(k_contiguous ? block_k : block_k * ld),
        k(k),
        lanes_along_k(k_contiguous),
        index_inside(index < index_end) {
    if (k_contiguous) {
      full_tile = {index_inside ? 4 : 0, index_inside};
    } else {
      full_tile = {max(0, min(4, index_end - index)), index + 4 <= index_end};
    }
  }

  // Lanes inside in the K tile starting at k0 that crosses K's end.
  __device__ __forceinline__ LaneMask PartialTile(int k0, int k_end) const {
    const int first_k = k0 + k;
    if (lanes_along_k) {
      return {index_inside ? max(0, min(4, k_end - first_k)) : 0,
              index_inside && first_k + 4 <= k_end};
    }
    const bool k_inside = first_k < k_end;
    return {k_inside ? full_tile.count : 0, k_inside && full_tile.all};
  }
};

// Writes the 4 outputs c[0..3] of one row (alpha * acc + beta * c), the
// first `valid` of them, as one float4 when allowed and all are valid.
template <bool kVectorAccess>  // C's pointer and ldc allow 16-byte accesses
__device__ __forceinline__ void StoreOutputRow4(float* c, int valid,
                                                const float* acc, float alpha,
                                                float beta) {
  if (kVectorAccess && valid >= 4) {
    float4 out = make_float4(alpha * acc[0], alpha * acc[1], alpha * acc[2],
                             alpha * acc[3]);
    if (beta != 0.f) {  // C is read only when it matters
      const float4 old = *reinterpret_cast<const float4*>(c);
      out.x += beta * old.x;
      out.y += beta * old.y;
      out.z += beta * old.z;
      out.w += beta * old.w;
    }
    *reinterpret_cast<float4*>(c) = out;
    return;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (i < valid) StoreOutput(c + i, acc[i], alpha, beta);
  }
}

// Calls launch(std::bool_constant<trans_a>{}, std::bool_constant<trans_b>{}),
// turning the run-time transposes into template arguments.
template <typename Launch>
void DispatchTransposes(const SgemmArgs& args, Launch&& launch) {
  using T = std::true_type;
  using F = std::false_type;
  if (args.trans_a) {
    args.trans_b ? launch(T{}, T{}) : launch(T{}, F{});
  } else {
    args.trans_b ? launch(F{}, T{}) : launch(F{}, F{});
  }
}

// Members [first, first + count) of args' batch as a batch of their own:
// the pointers moved to member `first`. a and b may be null when k == 0;
// they are never read then, and stay null.
inline SgemmArgs BatchChunk(const SgemmArgs& args, int first, int count) {
  SgemmArgs chunk = args;
  chunk.batch_count = count;
  if (chunk.a != nullptr) chunk.a += first * args.stride_a;
  if (chunk.b != nullptr) chunk.b += first * args.stride_b;
  chunk.c += first * args.stride_c;
  return chunk;
}

// Runs launch_one(chunk) for batch chunks of at most kMaxGridZ members (the
// chunk's pointers moved to its first member) and checks each launch.
template <typename LaunchOne>
cudaError_t ForEachBatchChunk(const SgemmArgs& args, LaunchOne&& launch_one) {
  if (args.m == 0 || args.n == 0) return cudaSuccess;
  for (int first = 0; first < args.batch_count; first += kMaxGridZ) {
    const SgemmArgs chunk =
        BatchChunk(args, first, std::min(kMaxGridZ, args.batch_count - first));
    launch_one(chunk);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace gemm::kernels::detail

#endif  // GEMM_KERNELS_SGEMM_COMMON_CUH_
