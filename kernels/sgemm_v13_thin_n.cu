// v13, a product with at most 16 columns (N <= 16) as a stream of A's rows.
// There C = A * B reads all of A (m x k) once and B (k x N) is tiny, so the
// product is bound by A's bytes, not by arithmetic: 4096 x 16 x 4096 moves
// 64 MB of A for 0.5 GFLOP. v11's 128 x 16 tiles stage A through shared
// memory transposed to [k][m], a word at a time, and are latency-bound
// there (docs/kernels.md, v11). v13 keeps A out of shared memory:
//
//  - Each thread owns 2 rows of C and all N of their columns (2 x 16
//    float32 sums in registers). A block of 128 threads owns 256 rows and a
//    range of K; its slice of B (that range x 16, zero-padded past N) sits
//    in shared memory, where every lane of a warp reads the same k at once
//    (a broadcast).
//  - A stored as it is: each thread reads 8 consecutive k of each of its
//    rows as two 16-byte loads (a whole 32-byte sector), then does 2 x 8 x
//    16 FMAs. A stored transposed: the warp's 32 rows are consecutive in
//    memory, so each k is one coalesced 128-byte load.
//  - K is cut into ranges (splits) until there are about kBlocksPerSm
//    blocks per SM; as in v11 each range writes its partial sums to a
//    workspace and SumSplits adds them in split order (the same bits on
//    every run). With one range the block writes C itself.
//
// For N > 16 the launcher runs v11.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/sgemm_common.cuh"
#include "kernels/sgemm_launchers.h"

namespace gemm::kernels {
namespace {

using detail::CeilDiv;
using detail::StoreOutput;

constexpr int kThreads = 128;
constexpr int kRowsPerThread = 2;
constexpr int kBlockRows = kThreads * kRowsPerThread;
constexpr int kN = 16;      // columns of C per thread (N <= kN)
constexpr int kStepK = 8;   // k per step: two float4 of a row of A
constexpr int kMaxRangeK = 512;  // K range per block at most: B's slice fits
constexpr int kBlocksPerSm = 4;

template <bool kTransA,       // A is stored transposed (k x m)
          bool kVectorAccess>  // A's rows may be read 16 bytes at a time
__global__ void __launch_bounds__(kThreads)
    SgemmThinNKernel(SgemmArgs args, int splits, int k_per_split,
                     float* partials) {
  // B's slice: [k][kN], zeros past N.
  __shared__ __align__(16) float b_slice[kMaxRangeK * kN];
  const int64_t member = blockIdx.z / splits;
  const int split = blockIdx.z % splits;
  const float* const a = args.a + member * args.stride_a;
  const float* const b = args.b + member * args.stride_b;
  const int k_begin = split * k_per_split;
  const int k_end = min(args.k, k_begin + k_per_split);
  const int range = max(0, k_end - k_begin);

  for (int i = threadIdx.x; i < range * kN; i += kThreads) {
    const int kk = i / kN, n = i % kN;
    const int64_t k = k_begin + kk;
    b_slice[i] = n < args.n ? (args.trans_b ? b[n * args.ldb + k]
                                            : b[k * args.ldb + n])
                            : 0.f;
  }
  __syncthreads();

  // This thread's rows: tid and tid + kThreads of the block's 256, so that
  // a warp's lanes hold 32 consecutive rows.
  int rows[kRowsPerThread];
  bool live[kRowsPerThread];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    rows[r] = blockIdx.x * kBlockRows + r * kThreads + threadIdx.x;
    live[r] = rows[r] < args.m;
  }
  float acc[kRowsPerThread][kN] = {};

  // acc[r][n] += a_values[r][j] * B(k0 + j, n) for j < count.
  auto multiply = [&](const float (&a_values)[kRowsPerThread][kStepK],
                      int kk0, int count) {
#pragma unroll
    for (int j = 0; j < kStepK; ++j) {
      if (j < count) {
        const float4* const b_row =
            reinterpret_cast<const float4*>(b_slice + (kk0 + j) * kN);
#pragma unroll
        for (int q = 0; q < kN / 4; ++q) {
          const float4 bq = b_row[q];
#pragma unroll
          for (int r = 0; r < kRowsPerThread; ++r) {
            acc[r][4 * q + 0] += a_values[r][j] * bq.x;
            acc[r][4 * q + 1] += a_values[r][j] * bq.y;
            acc[r][4 * q + 2] += a_values[r][j] * bq.z;
            acc[r][4 * q + 3] += a_values[r][j] * bq.w;
          }
        }
      }
    }
  };

  for (int kk0 = 0; kk0 < range; kk0 += kStepK) {
    const int count = min(kStepK, range - kk0);
    const int64_t k0 = k_begin + kk0;
    float a_values[kRowsPerThread][kStepK];
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      if (kTransA) {
        // A(row, k) = a[k * lda + row]: one coalesced word per k for the
        // warp's 32 consecutive rows.
#pragma unroll
        for (int j = 0; j < kStepK; ++j) {
          a_values[r][j] = live[r] && j < count
                               ? a[(k0 + j) * args.lda + rows[r]]
                               : 0.f;
        }
      } else {
        const float* const row = a + rows[r] * args.lda + k0;
        if (kVectorAccess && count == kStepK && live[r]) {
          const float4 lo = *reinterpret_cast<const float4*>(row);
          const float4 hi = *reinterpret_cast<const float4*>(row + 4);
          a_values[r][0] = lo.x;
          a_values[r][1] = lo.y;
          a_values[r][2] = lo.z;
          a_values[r][3] = lo.w;
          a_values[r][4] = hi.x;
          a_values[r][5] = hi.y;
          a_values[r][6] = hi.z;
          a_values[r][7] = hi.w;
        } else {
#pragma unroll
          for (int j = 0; j < kStepK; ++j) {
            a_values[r][j] = live[r] && j < count ? row[j] : 0.f;
          }
        }
      }
    }
    multiply(a_values, kk0, count);
  }

  float* const c = args.c + member * args.stride_c;
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    if (!live[r]) continue;
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      if (n >= args.n) break;
      if (splits == 1) {
        StoreOutput(c + rows[r] * args.ldc + n, acc[r][n], args.alpha,
                    args.beta);
      } else {
        // This split's dense m x n partial of this member.
        partials[(member * splits + split) * int64_t{args.m} * args.n +
                 int64_t{rows[r]} * args.n + n] = acc[r][n];
      }
    }
  }
}

}  // namespace

cudaError_t LaunchSgemmThinN(const SgemmArgs& args, cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return cudaSuccess;
  if (args.n > kN) return LaunchSgemmPipelinedSplitK(args, stream);
  int device = 0, sms = 132;
  if (cudaGetDevice(&device) == cudaSuccess) {
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  }
  const int row_blocks = CeilDiv(args.m, kBlockRows);
  // K ranges of whole steps, at most kMaxRangeK, enough for kBlocksPerSm
  // blocks per SM.
  const int64_t blocks = int64_t{row_blocks} * args.batch_count;
  const int wanted = static_cast<int>(std::clamp<int64_t>(
      CeilDiv(kBlocksPerSm * sms, static_cast<int>(std::min<int64_t>(
                                      blocks, 1 << 20))),
      1, std::max(1, CeilDiv(args.k, kStepK))));
  int k_per_split =
      CeilDiv(CeilDiv(std::max(args.k, 1), wanted), kStepK) * kStepK;
  k_per_split = std::min(k_per_split, kMaxRangeK);
  const int splits = CeilDiv(std::max(args.k, 1), k_per_split);
  const bool vector_access =
      !args.trans_a && args.lda % 4 == 0 &&
      reinterpret_cast<uintptr_t>(args.a) % 16 == 0 &&
      (args.batch_count == 1 || args.stride_a % 4 == 0);
  const int members_per_launch = std::max(1, detail::kMaxGridZ / splits);
  cudaMemPool_t pool;
  if (splits > 1) {
    if (cudaError_t err = SgemmWorkspacePool(device, &pool);
        err != cudaSuccess) {
      return err;
    }
  }
  for (int first = 0; first < args.batch_count; first += members_per_launch) {
    SgemmArgs chunk = args;
    chunk.batch_count = std::min(members_per_launch, args.batch_count - first);
    if (chunk.a != nullptr) chunk.a += first * args.stride_a;
    if (chunk.b != nullptr) chunk.b += first * args.stride_b;
    chunk.c += first * args.stride_c;
    float* partials = nullptr;
    if (splits > 1) {
      const cudaError_t err = cudaMallocFromPoolAsync(
          reinterpret_cast<void**>(&partials),
          sizeof(float) * splits * chunk.batch_count * int64_t{chunk.m} *
              chunk.n,
          pool, stream);
      if (err != cudaSuccess) return err;
    }
    const dim3 grid(row_blocks, 1, chunk.batch_count * splits);
    if (chunk.trans_a) {
      SgemmThinNKernel<true, false>
          <<<grid, kThreads, 0, stream>>>(chunk, splits, k_per_split, partials);
    } else if (vector_access) {
      SgemmThinNKernel<false, true>
          <<<grid, kThreads, 0, stream>>>(chunk, splits, k_per_split, partials);
    } else {
      SgemmThinNKernel<false, false>
          <<<grid, kThreads, 0, stream>>>(chunk, splits, k_per_split, partials);
    }
    cudaError_t err = cudaGetLastError();
    if (splits > 1 && err == cudaSuccess) {
      err = LaunchSumSplits(chunk, splits, partials, stream);
    }
    if (partials != nullptr) {
      const cudaError_t freed = cudaFreeAsync(partials, stream);
      if (err == cudaSuccess) err = freed;
    }
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace gemm::kernels
