// v10-packed: v10's kernel in K slices of 32 with 2 stages (128 x 128 block
// tiles of 8 warps of 64 x 32, two blocks per SM), every operand copied 16
// bytes at a time. v10 copies an operand whose stored rows run along K (A as
// is, B transposed) a word at a time, to transpose it on the way into shared
// memory: 16 cp.async of 4 bytes a thread a K slice of 32 where quads take 4.
// Here a first pass transposes such an operand into a workspace, K-major
// along m or n, and the kernel then always runs as T N: A^T (k x m) and B
// (k x n), both copied in quads. Of v10's tile sweep this configuration was
// the fastest as T N at 4096^3 (decision 0063). The pass reads and writes
// the operand once (45 us for a 4096 x 4096 operand on an H100), so the
// kernel pays off on large products. It runs by name only: the shape tuner
// leaves it out (TunerCandidates).
//
// The workspace (k x m and k x n rounded up to 4, per batch member) comes
// from v11's stream-ordered pool (SgemmWorkspacePool), batches in chunks
// that keep it under 1 GiB (at least one member), and goes back to the pool
// after the launch, in stream order.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/sgemm_common.cuh"
#include "kernels/sgemm_cp_async.cuh"
#include "kernels/sgemm_launchers.h"

namespace gemm::kernels {
namespace {

constexpr int64_t kMaxWorkspaceBytes = int64_t{1} << 30;

// out(c, r) = x(r, c) for r < rows, c < cols: x stored rows x cols with row
// stride ld, out cols x rows with row stride out_ld; member blockIdx.z at
// member_stride and out_member floats. A 32 x 32 tile per block of 32 x 8
// threads through shared memory (a column of padding: no bank conflicts),
// so that the reads along c and the writes along r both coalesce.
__global__ void __launch_bounds__(256)
    TransposeOperand(const float* x, int64_t ld, int64_t member_stride,
                     int rows, int cols, float* out, int64_t out_ld,
                     int64_t out_member) {
  __shared__ float tile[32][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c0 = blockIdx.x * 32;
  const float* src = x + blockIdx.z * member_stride;
  float* dst = out + blockIdx.z * out_member;
  // gridDim.y is capped at 65535: a block may take several row tiles.
  for (int64_t r0 = int64_t{blockIdx.y} * 32; r0 < rows;
       r0 += int64_t{gridDim.y} * 32) {
#pragma unroll
    for (int i = 0; i < 32; i += 8) {
      const int64_t r = r0 + ty + i;
      const int c = c0 + tx;
      if (r < rows && c < cols) tile[ty + i][tx] = src[r * ld + c];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 32; i += 8) {
      const int c = c0 + ty + i;
      const int64_t r = r0 + tx;
      if (r < rows && c < cols) dst[int64_t{c} * out_ld + r] = tile[tx][ty + i];
    }
    __syncthreads();  // the tile is read before the next one is written
  }
}

// Transposes `rows` x k of x (row stride ld) of each of `members` members
// into out (k x rows_pad each).
void Transpose(const float* x, int64_t ld, int64_t member_stride, int rows,
               int k, int members, float* out, int64_t rows_pad,
               cudaStream_t stream) {
  const dim3 grid(
      detail::CeilDiv(k, 32),
      static_cast<unsigned>(std::min(detail::CeilDiv(rows, 32), 65535)),
      members);
  TransposeOperand<<<grid, dim3(32, 8), 0, stream>>>(
      x, ld, member_stride, rows, k, out, rows_pad, k * rows_pad);
}

}  // namespace

cudaError_t LaunchSgemmCpAsyncPacked(const SgemmArgs& args,
                                     cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return cudaSuccess;
  // What each member needs of the workspace: A as is becomes A^T (k x m4),
  // B transposed becomes B (k x n4). With k == 0 nothing is read.
  const bool pack_a = !args.trans_a && args.k > 0;
  const bool pack_b = args.trans_b && args.k > 0;
  const int64_t m4 = (int64_t{args.m} + 3) / 4 * 4;
  const int64_t n4 = (int64_t{args.n} + 3) / 4 * 4;
  const int64_t a_floats = pack_a ? int64_t{args.k} * m4 : 0;
  const int64_t b_floats = pack_b ? int64_t{args.k} * n4 : 0;
  const int64_t member_floats = a_floats + b_floats;
  const int64_t fit = std::max<int64_t>(
      1, kMaxWorkspaceBytes / std::max<int64_t>(1, member_floats * 4));
  const int per_launch = static_cast<int>(
      std::min<int64_t>({fit, args.batch_count, detail::kMaxGridZ}));
  cudaMemPool_t pool = nullptr;
  if (member_floats > 0) {
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = SgemmWorkspacePool(device, &pool);
    if (err != cudaSuccess) return err;
  }
  for (int first = 0; first < args.batch_count; first += per_launch) {
    SgemmArgs chunk = detail::BatchChunk(
        args, first, std::min(per_launch, args.batch_count - first));
    float* packed = nullptr;
    if (member_floats > 0) {
      const cudaError_t err = cudaMallocFromPoolAsync(
          reinterpret_cast<void**>(&packed),
          sizeof(float) * member_floats * chunk.batch_count, pool, stream);
      if (err != cudaSuccess) return err;
    }
    if (pack_a) {
      Transpose(chunk.a, chunk.lda, chunk.stride_a, chunk.m, chunk.k,
                chunk.batch_count, packed, m4, stream);
      chunk.a = packed;
      chunk.lda = m4;
      chunk.stride_a = a_floats;
    }
    if (pack_b) {
      float* const b = packed + a_floats * chunk.batch_count;
      Transpose(chunk.b, chunk.ldb, chunk.stride_b, chunk.n, chunk.k,
                chunk.batch_count, b, n4, stream);
      chunk.b = b;
      chunk.ldb = n4;
      chunk.stride_b = b_floats;
    }
    chunk.trans_a = true;
    chunk.trans_b = false;
    detail::LaunchCpAsyncChunk<128, 128, 32, 64, 32, 2, 2, detail::kRowPad,
                               true, false>(
        chunk, SgemmVectorAccessAllowed(chunk), stream);
    cudaError_t err = cudaGetLastError();
    err = SgemmWorkspaceRelease(packed, err, stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace gemm::kernels
