// v12, 3xTF32 on Hopper's warpgroup Tensor Core instruction (wgmma). v9 ran
// the 3xTF32 products on mma.sync, a warp at a time, and reached only 86-89%
// of cuBLAS SGEMM: the splits, the fragment loads and the barriers left the
// Tensor Cores idle most of the time. v12 moves that work out of their way:
//
//  1. A packing pass (PackKMajor) writes each operand once into a workspace
//     as its TF32 high part and residual (SplitTf32, the split v9 uses),
//     each in an array of its own, K-major (wgmma's TF32 operands must be)
//     with K padded to whole slices and rows to whole tiles, zeros outside
//     the matrix. Every transpose and alignment becomes the same aligned
//     layout here, so the multiply has no bounds checks and no transposed
//     loads.
//  2. The multiply: a block of two warpgroups owns a 128 x 128 tile of C,
//     each warpgroup 64 rows. Slices of 32 k (one 128-byte row per m or n)
//     are copied by cp.async into 3 shared-memory stages of 4 tiles (A's
//     parts, B's parts), laid out in the 128-byte swizzle that wgmma's
//     shared-memory descriptors read (the 16-byte chunk c of row r sits at
//     chunk c ^ (r % 8)). Per k8 step, three m64n128k8 TF32 products, both
//     operands read by wgmma from shared memory: small(a)big(b),
//     big(a)small(b), big(a)big(b). A slice's products run while the next
//     slice is issued; a stage takes new copies once the products of the
//     slice in it are done in both warpgroups.
//  3. As in v9, the Tensor Cores truncate as they accumulate, so products
//     are summed on them for kSlicesPerSum slices only (1, 2 or 4 by K:
//     SlicesPerSum) from zero in a register set of their own, which is then
//     added to the running float32 sum (rounded to nearest).
//
// wgmma exists only on compute capability 9.0 (compiled as sm_90a); the
// launcher refuses other devices. docs/reference/kernels.md has the
// measurements of each step.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/sgemm_common.cuh"
#include "kernels/sgemm_cp_async.cuh"
#include "kernels/sgemm_launchers.h"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "sgemm_v12_wgmma_3xtf32.cu uses wgmma: compile it for sm_90a only"
#endif

namespace gemm::kernels {
namespace {

using detail::CeilDiv;
using detail::CommitCopies;
using detail::CopyAsync;
using detail::SplitTf32;
using detail::StoreOutput;
using detail::WaitCopies;

constexpr int kBlockM = 128;  // rows of C per block: two warpgroups of 64
constexpr int kBlockN = 128;  // columns of C per block: wgmma's n
constexpr int kBlockK = 32;   // a slice: one 128-byte row per m or n
constexpr int kStages = 3;
constexpr int kThreads = 256;
// A tile of a slice (the high parts or the residuals of A or of B): 128 rows
// of 32. A stage holds A's two, then B's two.
constexpr int kTileFloats = 128 * kBlockK;
constexpr int kStageFloats = 4 * kTileFloats;
// The swizzle's pattern repeats every 1024 bytes; the tiles start on such a
// boundary (the dynamic shared memory is aligned by hand: + 1024).
constexpr int kSwizzleBytes = 1024;
constexpr int kSharedBytes =
    kStages * kStageFloats * static_cast<int>(sizeof(float)) + kSwizzleBytes;
// Blocks run in groups of kGroupM tile rows, column by column, so that the
// blocks on the GPU at once share A's and B's slices in L2.
constexpr int kGroupM = 8;
// Batch members packed per launch: as many as fit in this (at least one).
constexpr int64_t kMaxWorkspaceBytes = int64_t{1} << 30;

// The packed operands of a batch member, each K-major with row stride kp.
struct PackedMember {
  const float* a_big;    // mp x kp: big(op(A))
  const float* a_small;  // mp x kp: small(op(A))
  const float* b_big;    // np x kp: big(op(B)^T)
  const float* b_small;  // np x kp: small(op(B)^T)
};

// Writes rows x k of X (X(r, k) = x[r * row_stride + k * k_stride] of member
// blockIdx.z) K-major as its TF32 parts into big and small (rows_pad x kp
// per member, zeros past rows and k). A 32 x 32 tile per block of 32 x 8
// threads, through shared memory, so that both the reads (along whichever
// of r and k is contiguous) and the writes (along k) coalesce.
template <bool kKContiguous>  // k_stride == 1, else row_stride == 1
__global__ void __launch_bounds__(256)
    PackKMajor(const float* x, int64_t row_stride, int64_t k_stride,
               int64_t member_stride, int rows, int k, int kp, int64_t rows_pad,
               int64_t out_member_floats, float* big, float* small) {
  __shared__ float tile[32][33];
  const int k0 = blockIdx.x * 32;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const float* src = x + blockIdx.z * member_stride;
  // gridDim.y is capped at 65535: a block may take several row tiles.
  for (int64_t r0 = blockIdx.y * 32; r0 < rows_pad; r0 += gridDim.y * 32) {
#pragma unroll
    for (int i = 0; i < 32; i += 8) {
      // This thread reads X(r, kk), kept at tile[r - r0][kk - k0].
      const int64_t r = kKContiguous ? r0 + ty + i : r0 + tx;
      const int kk = kKContiguous ? k0 + tx : k0 + ty + i;
      const float v = r < rows && kk < k
                          ? src[static_cast<int64_t>(r) * row_stride +
                                int64_t{kk} * k_stride]
                          : 0.f;
      if (kKContiguous) {
        tile[ty + i][tx] = v;
      } else {
        tile[tx][ty + i] = v;
      }
    }
    __syncthreads();
    const int64_t member_out = blockIdx.z * out_member_floats;
#pragma unroll
    for (int i = 0; i < 32; i += 8) {
      const int64_t at = member_out + (r0 + ty + i) * kp + k0 + tx;
      uint32_t hi, lo;
      SplitTf32(tile[ty + i][tx], hi, lo);
      big[at] = __uint_as_float(hi);
      small[at] = __uint_as_float(lo);
    }
    __syncthreads();  // the tile is read before the next one is written
  }
}

// The shared-memory descriptor of a K-major tile in the 128-byte swizzle:
// rows of 128 bytes, 8-row groups 1024 bytes apart. A k8 step further along
// the rows is 32 bytes further: + 2 in the descriptor's address field.
__device__ __forceinline__ uint64_t SwizzledTileDescriptor(const float* tile) {
  const uint32_t address =
      static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  return uint64_t{(address & 0x3FFFF) >> 4}  // start address, in 16 bytes
         | uint64_t{16 >> 4} << 16           // leading offset (unused here)
         | uint64_t{1024 >> 4} << 32         // stride between 8-row groups
         | uint64_t{1} << 62;                // 128-byte swizzle
}

// Float offset of (row, k) in a swizzled tile: 16-byte chunk k / 4 of the row
// is stored at chunk (k / 4) ^ (row % 8).
__device__ __forceinline__ int SwizzledOffset(int row, int k) {
  return row * kBlockK + (((k / 4) ^ (row % 8)) * 4) + k % 4;
}

__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most kPending committed groups of this warpgroup's wgmma
// are still running.
template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending)
               : "memory");
}
// Keeps the compiler from moving reads of d across the wait above.
__device__ __forceinline__ void PinRegisters(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// d += a * b for one m64n128k8 TF32 step of the warpgroup, both operands
// read from shared memory through their descriptors. With scale_d == 0,
// d = a * b.
__device__ __forceinline__ void WgmmaTf32(float (&d)[64], uint64_t a_desc,
                                          uint64_t b_desc, int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
      "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "
      "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, "
      "%58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
        "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]),
        "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),
        "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a_desc), "l"(b_desc), "r"(scale_d));
}

// Makes this thread's shared-memory writes (cp.async's included) visible to
// the async proxy, through which wgmma reads shared memory.
__device__ __forceinline__ void FenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Copies slice `k0` of this block's packed rows into a stage: 4 tiles of 128
// rows x 8 chunks of 16 bytes, 4 chunks of each per thread, swizzled.
__device__ __forceinline__ void CopySlice(float* stage, const PackedMember& p,
                                          int64_t kp, int k0, int tid) {
  const int chunk = tid % 8;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = tid / 8 + 32 * i;
    const int dst = SwizzledOffset(row, chunk * 4);
    const int64_t src = row * kp + k0 + chunk * 4;
    CopyAsync<16>(stage + dst, p.a_big + src, 16);
    CopyAsync<16>(stage + kTileFloats + dst, p.a_small + src, 16);
    CopyAsync<16>(stage + 2 * kTileFloats + dst, p.b_big + src, 16);
    CopyAsync<16>(stage + 3 * kTileFloats + dst, p.b_small + src, 16);
  }
}

template <int kSlicesPerSum>  // slices summed on the Tensor Cores per add
__global__ void __launch_bounds__(kThreads, 1)
    SgemmWgmma3xTf32Kernel(SgemmArgs args, const float* packed, int kp,
                           int tiles_m, int tiles_n, int64_t member_floats) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  float* const shared = reinterpret_cast<float*>(
      (reinterpret_cast<uintptr_t>(shared_bytes) + kSwizzleBytes - 1) &
      ~uintptr_t{kSwizzleBytes - 1});
  const int tid = threadIdx.x;
  const int warpgroup = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int group = lane / 4, in_group = lane % 4;

  // This block's tile: groups of kGroupM tile rows, walked column by column.
  const int tiles_per_group = kGroupM * tiles_n;
  const int first_m = (blockIdx.x / tiles_per_group) * kGroupM;
  const int group_rows = min(tiles_m - first_m, kGroupM);
  const int tile_m = first_m + (blockIdx.x % tiles_per_group) % group_rows;
  const int tile_n = (blockIdx.x % tiles_per_group) / group_rows;
  const int64_t mp = int64_t{tiles_m} * kBlockM,
                np = int64_t{tiles_n} * kBlockN;

  const float* const member = packed + blockIdx.z * member_floats;
  const int64_t a_at = tile_m * int64_t{kBlockM} * kp,
                b_at = 2 * mp * kp + tile_n * int64_t{kBlockN} * kp;
  const PackedMember p{member + a_at, member + mp * kp + a_at, member + b_at,
                       member + np * kp + b_at};
  const int slices = kp / kBlockK;

  // Slices 0 and 1 in flight; then each pass starts the copies of slice + 2
  // once the products of slice - 1 are done (see below). One commit group
  // per slice, empty ones past the end, so that the count stays in step.
  constexpr int kAhead = kStages - 1;
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < slices) {
      CopySlice(shared + s * kStageFloats, p, kp, s * kBlockK, tid);
    }
    CommitCopies();
  }

  float acc[64] = {};
  float slice_acc[64] = {};  // the first product of each sum overwrites it
  for (int slice = 0; slice < slices; ++slice) {
    WaitCopies<kAhead - 1>();
    FenceProxyAsync();
    __syncthreads();  // the slice is in, for every thread

    // This warpgroup's 64 rows of A's tiles, and B's tiles.
    const float* const stage = shared + (slice % kStages) * kStageFloats;
    const int a_rows = warpgroup * 64 * kBlockK;
    const uint64_t a_big = SwizzledTileDescriptor(stage + a_rows);
    const uint64_t a_small =
        SwizzledTileDescriptor(stage + kTileFloats + a_rows);
    const uint64_t b_big = SwizzledTileDescriptor(stage + 2 * kTileFloats);
    const uint64_t b_small = SwizzledTileDescriptor(stage + 3 * kTileFloats);
    const bool first_of_sum = slice % kSlicesPerSum == 0;
    WgmmaFence();
#pragma unroll
    for (int step = 0; step < 4; ++step) {
      // + 32 bytes per k8 step: 2 in the descriptors' 16-byte units.
      const int at = 2 * step;
      WgmmaTf32(slice_acc, a_small + at, b_big + at,
                !(first_of_sum && step == 0));
      WgmmaTf32(slice_acc, a_big + at, b_small + at, 1);
      WgmmaTf32(slice_acc, a_big + at, b_big + at, 1);
    }
    WgmmaCommit();
    const bool sum_ends =
        (slice + 1) % kSlicesPerSum == 0 || slice + 1 == slices;
    // This slice's products run on; the previous slice's are done, here
    // and (after the barrier) in the other warpgroup, so its stage can take
    // the copies of slice + 2.
    WgmmaWait<1>();
    __syncthreads();
    {
      const int next = slice + kAhead;
      if (next < slices) {
        CopySlice(shared + (next % kStages) * kStageFloats, p, kp,
                  next * kBlockK, tid);
      }
      CommitCopies();
    }
    if (sum_ends) {
      // All of the sum's products done: add them in float32.
      WgmmaWait<0>();
      PinRegisters(slice_acc);
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] += slice_acc[i];
    }
  }

  // acc[4 j + v]: row 64 warpgroup + 16 warp + group (+ 8 for v >= 2),
  // column 8 j + 2 in_group (+ 1 for odd v) of the block tile.
  float* const c = args.c + blockIdx.z * args.stride_c;
  const int row0 = tile_m * kBlockM + warpgroup * 64 + warp * 16 + group;
  const int col0 = tile_n * kBlockN + 2 * in_group;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const int row = row0 + (v >= 2 ? 8 : 0);
      const int col = col0 + 8 * j + v % 2;
      if (row < args.m && col < args.n) {
        StoreOutput(c + static_cast<int64_t>(row) * args.ldc + col,
                    acc[4 * j + v], args.alpha, args.beta);
      }
    }
  }
}

// How many slices' products the Tensor Cores sum before each float32 add.
// Their truncating sums add an error that grows with the slices summed but
// not with K, while float32's own error grows with K: longer sums are
// faster, and keep v12's error under cuBLAS SGEMM's where K is long.
int SlicesPerSum(int k) {
  if (k >= 4096) return 4;
  if (k >= 2048) return 2;
  return 1;
}

}  // namespace

bool SgemmWgmmaSupported(int device) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                             device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                             device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return major == 9 && minor == 0;
}

cudaError_t LaunchSgemmWgmma3xTf32(const SgemmArgs& args, cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return cudaSuccess;
  int device = 0;
  if (cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) return err;
  if (!SgemmWgmmaSupported(device)) return cudaErrorNotSupported;
  // K padded to whole slices must stay an int.
  if (args.k > INT32_MAX - kBlockK) return cudaErrorInvalidValue;
  const int kp = CeilDiv(args.k, kBlockK) * kBlockK;
  const int tiles_m = CeilDiv(args.m, kBlockM),
            tiles_n = CeilDiv(args.n, kBlockN);
  const int64_t mp = int64_t{tiles_m} * kBlockM,
                np = int64_t{tiles_n} * kBlockN;
  const int64_t member_floats = 2 * (mp + np) * kp;
  // Members per launch: the whole batch, or as many as keep the workspace
  // under kMaxWorkspaceBytes (at least one).
  const int64_t fit = std::max<int64_t>(
      1, kMaxWorkspaceBytes / std::max<int64_t>(1, member_floats * 4));
  const int per_launch = static_cast<int>(
      std::min<int64_t>({fit, args.batch_count, detail::kMaxGridZ}));
  cudaMemPool_t pool;
  if (cudaError_t err = SgemmWorkspacePool(device, &pool); err != cudaSuccess)
    return err;
  for (int first = 0; first < args.batch_count; first += per_launch) {
    const SgemmArgs chunk = detail::BatchChunk(
        args, first, std::min(per_launch, args.batch_count - first));
    float* packed = nullptr;
    cudaError_t err = cudaSuccess;
    if (kp > 0) {  // with k == 0 nothing is read: C = beta * C
      err = cudaMallocFromPoolAsync(
          reinterpret_cast<void**>(&packed),
          sizeof(float) * member_floats * chunk.batch_count, pool, stream);
      if (err != cudaSuccess) return err;
      const dim3 block(32, 8);
      const auto pack = [&](const float* x, bool trans, int64_t ld, int rows,
                            int64_t rows_pad, int64_t member_stride, float* big,
                            float* small) {
        const dim3 grid(
            kp / 32,
            static_cast<unsigned>(std::min<int64_t>(rows_pad / 32, 65535)),
            chunk.batch_count);
        // X(r, k) = op(A)(r, k), or op(B)(k, r): K-contiguous when A is
        // stored as is or B transposed.
        if (!trans) {
          PackKMajor<true><<<grid, block, 0, stream>>>(
              x, ld, 1, member_stride, rows, chunk.k, kp, rows_pad,
              member_floats, big, small);
        } else {
          PackKMajor<false><<<grid, block, 0, stream>>>(
              x, 1, ld, member_stride, rows, chunk.k, kp, rows_pad,
              member_floats, big, small);
        }
      };
      pack(chunk.a, chunk.trans_a, chunk.lda, chunk.m, mp, chunk.stride_a,
           packed, packed + mp * kp);
      float* const b_parts = packed + 2 * mp * kp;
      pack(chunk.b, !chunk.trans_b, chunk.ldb, chunk.n, np, chunk.stride_b,
           b_parts, b_parts + np * kp);
      err = cudaGetLastError();
    }
    auto launch = [&](auto kernel) {
      if (err == cudaSuccess) {
        err = cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
      }
      if (err == cudaSuccess) {
        kernel<<<dim3(tiles_m * tiles_n, 1, chunk.batch_count), kThreads,
                 kSharedBytes, stream>>>(chunk, packed, kp, tiles_m, tiles_n,
                                         member_floats);
        err = cudaGetLastError();
      }
    };
    switch (SlicesPerSum(chunk.k)) {
      case 1:
        launch(SgemmWgmma3xTf32Kernel<1>);
        break;
      case 2:
        launch(SgemmWgmma3xTf32Kernel<2>);
        break;
      default:
        launch(SgemmWgmma3xTf32Kernel<4>);
    }
    err = SgemmWorkspaceRelease(packed, err, stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace gemm::kernels
