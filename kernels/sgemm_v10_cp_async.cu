// v10, a multi-stage cp.async pipeline: v6's warp tiles, fed by the copy
// engine of sm_80 and later instead of by registers. Each thread issues
// `cp.async` copies from global straight into shared memory for the K slice
// kStages - 1 steps ahead of the one being multiplied, so up to kStages - 1
// slices are in flight while the warps compute; a slice costs one
// __syncthreads, and no register holds data on its way to shared memory (v7
// held two float4s per thread for that, which capped what else it could
// keep).
//
// Shared memory holds each operand as [k][m or n], rows padded by 4 floats.
// An operand whose rows run along m or n in memory (A transposed, B as is)
// is copied 16 bytes at a time along its rows. One whose rows run along K
// (A as is, B transposed) must be transposed on the way, so it is copied a
// word at a time, each warp covering 8 k by 4 rows: with the padding its 32
// words land on 32 distinct banks (without padding every k row starts on
// bank 0 and the 8 k of a warp's stores fall on the same bank: the 2-way to
// 8-way conflicts of v5-v8's transposed stores). The copies zero-fill what
// lies outside the matrix (cp.async's source size), so the same code serves
// inside and edge blocks and a partial last K slice, and the math needs no
// bounds checks. Without 16-byte alignment (kVectorAccess = false) every
// copy is a word.
//
// The multiply, the thread tiles and the epilogue are v6's.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/sgemm_common.cuh"
#include "kernels/sgemm_launchers.h"

namespace gemm::kernels {
namespace {

using detail::BatchMember;
using detail::CeilDiv;
using detail::StoreOutputRow4;

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

  // x: the operand (batch member); ld its leading dimension; x0: the block's
  // first m or n; x_end: m or n; k_end: K.
  __device__ __forceinline__ SliceCopier(const float* x, int64_t ld, int x0,
                                         int x_end, int k_end, int tid)
      : k_end_(k_end) {
    int k, xi;
    Place(tid, k, xi);
    dst_ = k * kStride + xi;
    k_ = k;
    room_ = x_end - (x0 + xi);
    // Every copy of this thread whole inside along x: only K can cut one.
    rows_inside_ = room_ - (kPerThread - 1) * kDeltaX >= (kQuads ? 4 : 1);
    src_ = kKContiguous ? x + static_cast<int64_t>(x0 + xi) * ld + k
                        : x + static_cast<int64_t>(k) * ld + x0 + xi;
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
  static_assert(kStages >= 2, "a pipeline needs two stages");
  using CopierA =
      SliceCopier<kBlockM, kBlockK, kThreads, !kTransA, kVectorAccess, kPad>;
  using CopierB =
      SliceCopier<kBlockN, kBlockK, kThreads, kTransB, kVectorAccess, kPad>;
  constexpr int kTileA = kBlockK * CopierA::kStride;
  constexpr int kTileB = kBlockK * CopierB::kStride;
  // kStages tiles of A ([k][m]), then kStages tiles of B ([k][n]).
  extern __shared__ __align__(16) float tiles[];
  float* const tiles_a = tiles;
  float* const tiles_b = tiles + kStages * kTileA;

  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  // First row and column of this lane's first thread tile in the block tile.
  const int warp_row = (warp / kWarpsN) * kWarpM,
            warp_col = (warp % kWarpsN) * kWarpN;
  const int lane_row = warp_row + (lane % kLanesM) * kThreadM,
            lane_col = warp_col + (lane / kLanesM) * kThreadN;
  const int block_row = blockIdx.y * kBlockM, block_col = blockIdx.x * kBlockN;
  const BatchMember p = detail::SelectBatchMember(args);
  CopierA copier_a(p.a, args.lda, block_row, args.m, args.k, tid);
  CopierB copier_b(p.b, args.ldb, block_col, args.n, args.k, tid);

  float acc[kIterM][kIterN][kThreadM][kThreadN] = {};
  // Accumulates the outer products of the K slice in `stage` (v6's math).
  auto compute = [&](int stage) {
    const float* a = tiles_a + stage * kTileA;
    const float* b = tiles_b + stage * kTileB;
#pragma unroll
    for (int dot = 0; dot < kBlockK; ++dot) {
      float4 frag_a[kIterM], frag_b[kIterN];
#pragma unroll
      for (int im = 0; im < kIterM; ++im) {
        frag_a[im] = *reinterpret_cast<const float4*>(
            &a[dot * CopierA::kStride + lane_row + im * kSubM]);
      }
#pragma unroll
      for (int in = 0; in < kIterN; ++in) {
        frag_b[in] = *reinterpret_cast<const float4*>(
            &b[dot * CopierB::kStride + lane_col + in * kSubN]);
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

  const int slices = (args.k + kBlockK - 1) / kBlockK;
  // Copies slice s (the next one) into `stage`; every thread commits a group
  // per slice, empty past the last, so that the group count tells which
  // have landed.
  auto copy_slice = [&](int s, int stage) {
    if (s < slices) {
      copier_a.CopyNext(tiles_a + stage * kTileA, s * kBlockK);
      copier_b.CopyNext(tiles_b + stage * kTileB, s * kBlockK);
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
    compute(read_stage);
    read_stage = read_stage == kStages - 1 ? 0 : read_stage + 1;
    write_stage = write_stage == kStages - 1 ? 0 : write_stage + 1;
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

// Launches the kernel with one tile configuration.
template <int kBlockM,         // block tile rows
          int kBlockN,         // block tile columns
          int kBlockK,         // K slice per stage
          int kWarpM,          // warp tile rows
          int kWarpN,          // warp tile columns
          int kStages,         // shared-memory stages
          int kMinBlocks,      // blocks per SM the registers must allow
          int kPad = kRowPad>  // floats of padding per k row
cudaError_t Launch(const SgemmArgs& args, cudaStream_t stream) {
  constexpr int kThreads = (kBlockM / kWarpM) * (kBlockN / kWarpN) * 32;
  constexpr int kSharedBytes = kStages * kBlockK *
                               (kBlockM + kPad + kBlockN + kPad) *
                               static_cast<int>(sizeof(float));
  const bool vector_access = SgemmVectorAccessAllowed(args);
  return detail::ForEachBatchChunk(args, [&](const SgemmArgs& chunk) {
    const dim3 grid(CeilDiv(chunk.n, kBlockN), CeilDiv(chunk.m, kBlockM),
                    chunk.batch_count);
    detail::DispatchTransposes(chunk, [&](auto trans_a, auto trans_b) {
      constexpr bool kTransA = decltype(trans_a)::value,
                     kTransB = decltype(trans_b)::value;
      auto launch = [&](auto kernel) {
        // Past 48 KB a kernel must ask for its dynamic shared memory (per
        // device; cheap to repeat).
        if (kSharedBytes > 48 * 1024) {
          const cudaError_t err = cudaFuncSetAttribute(
              kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
              kSharedBytes);
          if (err != cudaSuccess) return;  // the launch reports it
        }
        kernel<<<grid, kThreads, kSharedBytes, stream>>>(chunk);
      };
      if (vector_access) {
        launch(SgemmCpAsyncKernel<kBlockM, kBlockN, kBlockK, kWarpM, kWarpN,
                                  kStages, kMinBlocks, kPad, kTransA, kTransB,
                                  true>);
      } else {
        launch(SgemmCpAsyncKernel<kBlockM, kBlockN, kBlockK, kWarpM, kWarpN,
                                  kStages, kMinBlocks, kPad, kTransA, kTransB,
                                  false>);
      }
    });
  });
}

}  // namespace

// 128 x 128 blocks of 8 warps of 64 x 32 (v6's), K slices of 16, 3 stages.
cudaError_t LaunchSgemmCpAsync(const SgemmArgs& args, cudaStream_t stream) {
  return Launch<128, 128, 16, 64, 32, 3, 2>(args, stream);
}

// The same with K slices of 8 and 4 stages.
cudaError_t LaunchSgemmCpAsyncK8(const SgemmArgs& args, cudaStream_t stream) {
  return Launch<128, 128, 8, 64, 32, 4, 2>(args, stream);
}

// K slices of 16, 4 stages.
cudaError_t LaunchSgemmCpAsync4Stages(const SgemmArgs& args,
                                      cudaStream_t stream) {
  return Launch<128, 128, 16, 64, 32, 4, 2>(args, stream);
}

// 64 x 64 blocks of 4 warps of 32 x 32, K slices of 16, 4 stages.
cudaError_t LaunchSgemmCpAsyncSmallTiles(const SgemmArgs& args,
                                         cudaStream_t stream) {
  return Launch<64, 64, 16, 32, 32, 4, 4>(args, stream);
}

// 128 x 256 blocks of 8 warps of 64 x 64 (128 outputs a thread, one block per
// SM), K slices of 8, 3 stages.
cudaError_t LaunchSgemmCpAsyncWideTiles(const SgemmArgs& args,
                                        cudaStream_t stream) {
  return Launch<128, 256, 8, 64, 64, 3, 1>(args, stream);
}

// 128 x 128 blocks of 4 warps of 64 x 64 (128 outputs a thread), K slices
// of 16, 3 stages.
cudaError_t LaunchSgemmCpAsyncBigWarps(const SgemmArgs& args,
                                       cudaStream_t stream) {
  return Launch<128, 128, 16, 64, 64, 3, 2>(args, stream);
}

// v10-4stages without the padding: the bank conflicts it removes, measured.
cudaError_t LaunchSgemmCpAsyncUnpadded(const SgemmArgs& args,
                                       cudaStream_t stream) {
  return Launch<128, 128, 16, 64, 32, 4, 2, 0>(args, stream);
}

}  // namespace gemm::kernels
