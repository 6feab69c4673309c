// Device and launch helpers shared by the kernel files (sgemm_v*.cu): operand
// addressing for the transpose rule, batch-member selection, the epilogue,
// the zero-filling tile loader and batch chunking. Included by .cu files only.
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

// Runs launch_one(chunk) for batch chunks of at most kMaxGridZ members (the
// chunk's pointers moved to its first member) and checks each launch.
template <typename LaunchOne>
cudaError_t ForEachBatchChunk(const SgemmArgs& args, LaunchOne&& launch_one) {
  if (args.m == 0 || args.n == 0) return cudaSuccess;
  for (int first = 0; first < args.batch_count; first += kMaxGridZ) {
    SgemmArgs chunk = args;
    chunk.batch_count = std::min(kMaxGridZ, args.batch_count - first);
    // a and b may be null when k == 0; they are never read then.
    if (chunk.a != nullptr) chunk.a += first * args.stride_a;
    if (chunk.b != nullptr) chunk.b += first * args.stride_b;
    chunk.c += first * args.stride_c;
    launch_one(chunk);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace gemm::kernels::detail

#endif  // GEMM_KERNELS_SGEMM_COMMON_CUH_
