// The multi-stage cp.async pipeline of v10 and v11: copies of K slices
// from global straight into shared memory (SliceCopier) and the main loop
// that multiplies a block's tile over a K range while the next slices are
// in flight (CpAsyncMainloop), and v10's kernel on it (SgemmCpAsyncKernel).
// v10's file tells the design; sgemm_v10_tiles.cu sweeps the kernel's tile
// configurations; v11 runs the same main loop over a part of K; v12 uses
// the copy primitives (CopyAsync, CommitCopies, WaitCopies). Included by .cu
// files only.
//
// Thread-safety: device code; each block owns its shared memory.
//
//   using Loop = CpAsyncMainloop<128, 128, 16, 64, 32, 3, 4, false, false,
//                                true>;
//   Loop loop(block_row, block_col);         // in a kernel of Loop::kThreads
//   loop.Accumulate(args, member, 0, args.k, shared);  // then loop.acc
//   Loop::Launch(MyKernel<...>, grid, stream, args);   // on the host
#ifndef GEMM_KERNELS_SGEMM_CP_ASYNC_CUH_
#define GEMM_KERNELS_SGEMM_CP_ASYNC_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/sgemm_common.cuh"
#include "kernels/sgemm_launchers.h"
#include "kernels/sgemm_warp_tile.cuh"

namespace gemm::kernels::detail {

// Floats of padding at the end of each k row of a shared-memory tile.
constexpr int kRowPad = 4;

// cp.async of `bytes` (0..kSize) from src to shared dst, zero-filling the
// rest of kSize. Before sm_80 (no cp.async) a plain copy does the same work
// synchronously.
template <int kSize>  // 4 or 16 bytes
__device__ __forceinline__ void CopyAsync(float* dst, const float* src,
                                          int bytes) {
#if __CUDA_ARCH__ >= 800
  const unsigned shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  if constexpr (kSize == 16) {
    asm volatile(
        "cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared),
        "l"(src), "r"(bytes)
        : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared),
                 "l"(src), "r"(bytes)
                 : "memory");
  }
#else
  for (int i = 0; i < kSize / 4; ++i) dst[i] = 4 * i < bytes ? src[i] : 0.f;
#endif
}

__device__ __forceinline__ void CommitCopies() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most kPending committed groups of this thread's copies are
// still in flight.
template <int kPending>
__device__ __forceinline__ void WaitCopies() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Copies one K slice of an operand, kBlockK x kExtent of op(X) starting at
// (k0, x0) where x is m for A and n for B, into a shared-memory tile laid
// [k][x] with rows of kExtent + kRowPad floats. A thread's copies of a slice
// lie at a fixed distance from one another (kDeltaK, kDeltaX), so it keeps
// only where its first copy goes and reads from; a slice moves the source
// along K.
template <int kExtent,         // tile extent along m (A) or n (B)
          int kBlockK,         // K slice
          int kThreads,        // threads of the block
          bool kKContiguous,   // X's stored rows run along K
          bool kVectorAccess,  // 16-byte copies allowed
          int kPad>            // floats of padding per k row
class SliceCopier {
 public:
  static constexpr int kStride = kExtent + kPad;
  // Quads: 16-byte copies along x; otherwise single words.
  static constexpr bool kQuads = kVectorAccess && !kKContiguous;
  static constexpr int kCopies = kExtent * kBlockK / (kQuads ? 4 : 1);
  static constexpr int kPerThread = kCopies / kThreads;
  static_assert(kCopies % kThreads == 0, "copies split evenly over threads");
  // Where copy number e lands (Place): quads run along x, one k row after
  // another; words of a K-contiguous operand go in warp-sized patches of 8 k
  // (32 contiguous bytes of a stored row) by 4 rows, the patches along K
  // first; other words run along x. Copy e + kThreads then lands kDeltaK
  // rows and kDeltaX columns further.
  static constexpr int kDeltaK = kQuads         ? kThreads / (kExtent / 4)
                                 : kKContiguous ? 0
                                                : kThreads / kExtent;
  static constexpr int kDeltaX =
      kKContiguous && !kQuads ? kThreads / 32 / (kBlockK / 8) * 4 : 0;
  static_assert(!kKContiguous || (kBlockK % 8 == 0 && kExtent % 4 == 0 &&
                                  (kThreads / 32) % (kBlockK / 8) == 0),
                "a K-contiguous operand's patches: 8 k by 4 rows, each "
                "thread at one k");
  static_assert(kKContiguous || kQuads ? true : kThreads % kExtent == 0,
                "words along x: each thread at one x");
  static_assert(!kQuads || kThreads % (kExtent / 4) == 0,
                "quads along x: each thread at one x");

  // x: the operand (batch member); ld its leading dimension; x0: the
  // block's first m or n; x_end: m or n; [k_begin, k_end): the K range the
  // block multiplies.
  __device__ __forceinline__ SliceCopier(const float* x, int64_t ld, int x0,
                                         int x_end, int k_begin, int k_end,
                                         int tid)
      : k_end_(k_end) {
    int k, xi;
    Place(tid, k, xi);
    dst_ = k * kStride + xi;
    k_ = k;
    room_ = x_end - (x0 + xi);
    // Every copy of this thread whole inside along x: only K can cut one.
    rows_inside_ = room_ - (kPerThread - 1) * kDeltaX >= (kQuads ? 4 : 1);
    src_ = kKContiguous ? x + static_cast<int64_t>(x0 + xi) * ld + k_begin + k
                        : x + static_cast<int64_t>(k_begin + k) * ld + x0 + xi;
    next_ = kKContiguous ? kDeltaX * ld + kDeltaK : kDeltaK * ld + kDeltaX;
    step_ = kKContiguous ? kBlockK : kBlockK * ld;
  }

  // Issues the copies of the next slice, which starts at k0, into `tile`,
  // and moves on to the slice after it. Inside the matrix (every copy of the
  // thread inside along x and the slice inside K) the copies go whole, with
  // no checks; otherwise each copies what lies inside and zero-fills the
  // rest (its source address is then never read past what is inside).
  __device__ __forceinline__ void CopyNext(float* tile, int k0) {
    const float* src = src_;
    if (rows_inside_ && k0 + kBlockK <= k_end_) {
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        CopyAsync<kQuads ? 16 : 4>(tile + Dst(i), src, kQuads ? 16 : 4);
        src += next_;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) {
        const bool k_inside = k0 + k_ + i * kDeltaK < k_end_;
        const int room = room_ - i * kDeltaX;
        if (kQuads) {
          CopyAsync<16>(tile + Dst(i), src,
                        k_inside ? 4 * max(0, min(4, room)) : 0);
        } else {
          CopyAsync<4>(tile + Dst(i), src, k_inside && room > 0 ? 4 : 0);
        }
        src += next_;
      }
    }
    src_ += step_;
  }

 private:
  // Copy i's place in a tile.
  __device__ __forceinline__ int Dst(int i) const {
    return dst_ + i * (kDeltaK * kStride + kDeltaX);
  }

  __device__ __forceinline__ static void Place(int e, int& k, int& xi) {
    if (kQuads) {
      xi = (e % (kExtent / 4)) * 4;
      k = e / (kExtent / 4);
    } else if (kKContiguous) {
      const int patch = e / 32, word = e % 32;
      k = (patch % (kBlockK / 8)) * 8 + word % 8;
      xi = (patch / (kBlockK / 8)) * 4 + word / 8;
    } else {
      xi = e % kExtent;
      k = e / kExtent;
    }
  }

  int k_end_;
  int dst_;           // the first copy's place in a tile
  int k_;             // its k in the slice
  int room_;          // m or n from its x to the matrix's end
  bool rows_inside_;  // every copy inside along x
  const float* src_;  // the first copy's source in the next slice
  int64_t next_;      // from one copy's source to the next
  int64_t step_;      // from one slice to the next
};

// The main loop: a block's kBlockM x kBlockN tile of op(A) op(B) over a K
// range, in v6's warp and thread tiles (WarpTile, sgemm_warp_tile.cuh: its
// acc, math and epilogue), fed by kStages - 1 slices in flight.
template <int kBlockM,         // block tile rows (of C)
          int kBlockN,         // block tile columns (of C)
          int kBlockK,         // K slice per pipeline stage
          int kWarpM,          // warp tile rows
          int kWarpN,          // warp tile columns
          int kStages,         // shared-memory stages (slices in flight + 1)
          int kPad,            // floats of padding per shared-memory k row
          bool kTransA,        // A is stored transposed (k x m)
          bool kTransB,        // B is stored transposed (n x k)
          bool kVectorAccess>  // 16-byte global accesses allowed
struct CpAsyncMainloop : WarpTile<kBlockM, kBlockN, kWarpM, kWarpN> {
  using Tile = WarpTile<kBlockM, kBlockN, kWarpM, kWarpN>;
  static constexpr int kThreads = Tile::kThreads;
  static_assert(kStages >= 2, "a pipeline needs two stages");
  using CopierA =
      SliceCopier<kBlockM, kBlockK, kThreads, !kTransA, kVectorAccess, kPad>;
  using CopierB =
      SliceCopier<kBlockN, kBlockK, kThreads, kTransB, kVectorAccess, kPad>;
  static constexpr int kTileA = kBlockK * CopierA::kStride;
  static constexpr int kTileB = kBlockK * CopierB::kStride;
  // Dynamic shared memory: kStages tiles of A ([k][m]), then of B ([k][n]).
  static constexpr int kSharedBytes =
      kStages * (kTileA + kTileB) * static_cast<int>(sizeof(float));

  // Launches `kernel`, whose blocks run this loop, over `grid` on `stream`
  // with kThreads threads and kSharedBytes of dynamic shared memory, first
  // raising the kernel's limit where that passes the default 48 KB (per
  // device; cheap to repeat). Returns the launch's error without clearing
  // it, so that a caller's cudaGetLastError still sees it.
  template <typename... Params, typename... Args>
  static cudaError_t Launch(void (*kernel)(Params...), dim3 grid,
                            cudaStream_t stream, Args... args) {
    if (kSharedBytes > 48 * 1024) {
      const cudaError_t err = cudaFuncSetAttribute(
          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
      if (err != cudaSuccess) return err;
    }
    kernel<<<grid, kThreads, kSharedBytes, stream>>>(args...);
    return cudaPeekAtLastError();
  }

  __device__ __forceinline__ CpAsyncMainloop(int block_row, int block_col)
      : Tile(block_row, block_col) {}

  // Adds op(A) op(B) over k in [k_begin, k_end) to acc. `tiles`: the
  // block's kSharedBytes of shared memory.
  __device__ __forceinline__ void Accumulate(const SgemmArgs& args,
                                             const BatchMember& p, int k_begin,
                                             int k_end, float* tiles) {
    float* const tiles_a = tiles;
    float* const tiles_b = tiles + kStages * kTileA;
    const int tid = threadIdx.x;
    CopierA copier_a(p.a, args.lda, this->block_row, args.m, k_begin, k_end,
                     tid);
    CopierB copier_b(p.b, args.ldb, this->block_col, args.n, k_begin, k_end,
                     tid);
    const int slices = (k_end - k_begin + kBlockK - 1) / kBlockK;
    // Copies slice s (the next one) into `stage`; every thread commits a
    // group per slice, empty past the last, so that the group count tells
    // which have landed.
    auto copy_slice = [&](int s, int stage) {
      if (s < slices) {
        copier_a.CopyNext(tiles_a + stage * kTileA, k_begin + s * kBlockK);
        copier_b.CopyNext(tiles_b + stage * kTileB, k_begin + s * kBlockK);
      }
      CommitCopies();
    };
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) copy_slice(s, s);
    // The stage slice s is in, and the one slice s + kStages - 1 goes to.
    int read_stage = 0, write_stage = kStages - 1;
    for (int s = 0; s < slices; ++s) {
      WaitCopies<kStages - 2>();  // slice s has landed (this thread's part)
      __syncthreads();  // everyone's part of slice s; and slice s - 1, whose
                        // stage the next copy reuses, is multiplied
      copy_slice(s + kStages - 1, write_stage);
      this->template MultiplySlice<kBlockK, CopierA::kStride, CopierB::kStride>(
          tiles_a + read_stage * kTileA, tiles_b + read_stage * kTileB);
      read_stage = read_stage == kStages - 1 ? 0 : read_stage + 1;
      write_stage = write_stage == kStages - 1 ? 0 : write_stage + 1;
    }
  }
};

// v10's kernel: a block's tile over all of K on CpAsyncMainloop, then v6's
// epilogue (sgemm_v10_cp_async.cu; sgemm_v10_tiles.cu sweeps its tile
// configurations). Launch it with Loop::Launch.
template <int kBlockM,         // block tile rows (of C)
          int kBlockN,         // block tile columns (of C)
          int kBlockK,         // K slice per pipeline stage
          int kWarpM,          // warp tile rows
          int kWarpN,          // warp tile columns
          int kStages,         // shared-memory stages (slices in flight + 1)
          int kMinBlocks,      // blocks per SM the registers must allow
          int kPad,            // floats of padding per shared-memory k row
          bool kTransA,        // A is stored transposed (k x m)
          bool kTransB,        // B is stored transposed (n x k)
          bool kVectorAccess>  // 16-byte global accesses allowed
__global__ void __launch_bounds__((kBlockM / kWarpM) * (kBlockN / kWarpN) * 32,
                                  kMinBlocks)
    SgemmCpAsyncKernel(SgemmArgs args) {
  using Loop = CpAsyncMainloop<kBlockM, kBlockN, kBlockK, kWarpM, kWarpN,
                               kStages, kPad, kTransA, kTransB, kVectorAccess>;
  extern __shared__ __align__(16) float tiles[];
  const BatchMember p = SelectBatchMember(args);
  Loop loop(blockIdx.y * kBlockM, blockIdx.x * kBlockN);
  loop.Accumulate(args, p, 0, args.k, tiles);
  loop.template Store<kVectorAccess>(args, p.c);
}

// Launches SgemmCpAsyncKernel with one tile configuration and fixed
// transposes over one batch chunk (at most kMaxGridZ members), in 16-byte
// accesses where vector_access allows them. The launch's error is left for
// the caller's cudaGetLastError.
template <int kBlockM,     // block tile rows
          int kBlockN,     // block tile columns
          int kBlockK,     // K slice per stage
          int kWarpM,      // warp tile rows
          int kWarpN,      // warp tile columns
          int kStages,     // shared-memory stages
          int kMinBlocks,  // blocks per SM the registers must allow
          int kPad,        // floats of padding per k row
          bool kTransA,    // A is stored transposed (k x m)
          bool kTransB>    // B is stored transposed (n x k)
void LaunchCpAsyncChunk(const SgemmArgs& chunk, bool vector_access,
                        cudaStream_t stream) {
  const dim3 grid(CeilDiv(chunk.n, kBlockN), CeilDiv(chunk.m, kBlockM),
                  chunk.batch_count);
  auto launch = [&](auto vector) {
    constexpr bool kVector = decltype(vector)::value;
    using Loop = CpAsyncMainloop<kBlockM, kBlockN, kBlockK, kWarpM, kWarpN,
                                 kStages, kPad, kTransA, kTransB, kVector>;
    Loop::Launch(
        SgemmCpAsyncKernel<kBlockM, kBlockN, kBlockK, kWarpM, kWarpN, kStages,
                           kMinBlocks, kPad, kTransA, kTransB, kVector>,
        grid, stream, chunk);
  };
  vector_access ? launch(std::true_type{}) : launch(std::false_type{});
}

// Launches SgemmCpAsyncKernel with one tile configuration (the parameters
// are LaunchCpAsyncChunk's), for every transpose and either access width
// (v10's file; sgemm_v10_tiles.cu).
template <int kBlockM, int kBlockN, int kBlockK, int kWarpM, int kWarpN,
          int kStages, int kMinBlocks, int kPad = kRowPad>
cudaError_t LaunchCpAsync(const SgemmArgs& args, cudaStream_t stream) {
  const bool vector_access = SgemmVectorAccessAllowed(args);
  // ForEachBatchChunk reports each launch's error.
  return ForEachBatchChunk(args, [&](const SgemmArgs& chunk) {
    DispatchTransposes(chunk, [&](auto trans_a, auto trans_b) {
      LaunchCpAsyncChunk<kBlockM, kBlockN, kBlockK, kWarpM, kWarpN, kStages,
                         kMinBlocks, kPad, decltype(trans_a)::value,
                         decltype(trans_b)::value>(chunk, vector_access,
                                                   stream);
    });
  });
}

}  // namespace gemm::kernels::detail

#endif  // GEMM_KERNELS_SGEMM_CP_ASYNC_CUH_
