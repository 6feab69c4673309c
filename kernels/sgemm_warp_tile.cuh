// The warp tiling of v6 through v11 and the main loop of v6, v7 and v8.
//
// WarpTile: a block's kBlockM x kBlockN tile of C divided among its warps,
// and each warp's tile among its lanes (CUTLASS's hierarchy: block tile,
// warp tile, thread tile), with the lane's accumulators, the math of one K
// slice read from shared memory and the epilogue. Every kernel from v6 to
// v11 computes in it; they differ in how K slices reach shared memory.
//
// RegisterStagedMainloop: slices staged through registers, one float4 of
// each operand per thread per slice (v5's loads), over any K range. With one
// stage it is v6 (load, store to shared memory, multiply: two barriers a
// slice); with two it is v7 and v8 (the next slice travels into registers
// while this one is multiplied: one barrier a slice). v10 and v11 feed the
// same WarpTile with cp.async instead (sgemm_cp_async.cuh).
//
// Included by .cu files only.
//
// Thread-safety: device code; each block owns its shared memory.
//
//   using Loop = RegisterStagedMainloop<128, 128, 8, 64, 32, 2, false, false,
//                                       true>;
//   __shared__ __align__(16) float tiles[Loop::kSharedFloats];
//   Loop loop(block_row, block_col);   // in a kernel of Loop::kThreads
//   loop.Accumulate(args, member, 0, args.k, tiles);
//   loop.Store<true>(args, member.c);  // alpha * acc + beta * C
#ifndef GEMM_KERNELS_SGEMM_WARP_TILE_CUH_
#define GEMM_KERNELS_SGEMM_WARP_TILE_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/sgemm_common.cuh"

namespace gemm::kernels::detail {

// The lanes' 4 x 4 thread tiles lie 8 along m by 4 along n in a warp's
// 32 x 16 sub-tile, which a warp sweeps kIterM x kIterN times to cover its
// kWarpM x kWarpN tile. In a K slice a quarter-warp reads 8 consecutive
// float4s of A (all 32 banks once) and one float4 of B (a broadcast).
// acc[im][in][m][n] is sub-tile (im, in), row m and column n of the lane's
// thread tile: row lane_row + im * kSubM + m and column
// lane_col + in * kSubN + n of the block tile.
template <int kBlockM,  // block tile rows (of C)
          int kBlockN,  // block tile columns (of C)
          int kWarpM,   // warp tile rows
          int kWarpN>   // warp tile columns
struct WarpTile {
  static constexpr int kThreadM = 4, kThreadN = 4;
  static constexpr int kLanesM = 8, kLanesN = 4;
  static constexpr int kSubM = kLanesM * kThreadM, kSubN = kLanesN * kThreadN;
  static constexpr int kIterM = kWarpM / kSubM, kIterN = kWarpN / kSubN;
  static constexpr int kWarpsN = kBlockN / kWarpN;
  static constexpr int kThreads = (kBlockM / kWarpM) * kWarpsN * 32;
  static_assert(kLanesM * kLanesN == 32, "a warp is 32 lanes");
  static_assert(kWarpM % kSubM == 0 && kWarpN % kSubN == 0,
                "sub-tiles divide the warp tile");

  int block_row, block_col;  // the block tile's corner in C
  int lane_row, lane_col;    // the lane's first thread tile in the block tile
  float acc[kIterM][kIterN][kThreadM][kThreadN] = {};

  __device__ __forceinline__ WarpTile(int block_row, int block_col)
      : block_row(block_row), block_col(block_col) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    lane_row = (warp / kWarpsN) * kWarpM + (lane % kLanesM) * kThreadM;
    lane_col = (warp % kWarpsN) * kWarpN + (lane / kLanesM) * kThreadN;
  }

  // Adds the outer products of one K slice in shared memory: a laid [k][m]
  // with rows of kStrideA floats, b laid [k][n] with rows of kStrideB.
  template <int kBlockK,   // the slice's depth
            int kStrideA,  // floats from one k row of a to the next
            int kStrideB>  // floats from one k row of b to the next
  __device__ __forceinline__ void MultiplySlice(const float* a,
                                                const float* b) {
#pragma unroll
    for (int dot = 0; dot < kBlockK; ++dot) {
      float4 frag_a[kIterM], frag_b[kIterN];
#pragma unroll
      for (int im = 0; im < kIterM; ++im) {
        frag_a[im] = *reinterpret_cast<const float4*>(
            &a[dot * kStrideA + lane_row + im * kSubM]);
      }
#pragma unroll
      for (int in = 0; in < kIterN; ++in) {
        frag_b[in] = *reinterpret_cast<const float4*>(
            &b[dot * kStrideB + lane_col + in * kSubN]);
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
  }

  // The epilogue's walk: out(row, col, acc4) for each of the lane's rows of
  // 4 accumulators that lies in C's first m rows, where (row, col) is the
  // row's first element in C. Columns at or past n are out's to skip.
  template <typename Out>
  __device__ __forceinline__ void ForEachRow4(int m, Out&& out) const {
#pragma unroll
    for (int im = 0; im < kIterM; ++im) {
#pragma unroll
      for (int tm = 0; tm < kThreadM; ++tm) {
        const int row = block_row + lane_row + im * kSubM + tm;
        if (row >= m) continue;
#pragma unroll
        for (int in = 0; in < kIterN; ++in) {
          out(row, block_col + lane_col + in * kSubN, acc[im][in][tm]);
        }
      }
    }
  }

  // The plain epilogue: C = alpha * acc + beta * C inside args' m x n, C
  // read only where beta is not 0.
  template <bool kVectorAccess>  // C's pointer and ldc allow float4 stores
  __device__ __forceinline__ void Store(const SgemmArgs& args, float* c) const {
    ForEachRow4(args.m, [&](int row, int col, const float* acc4) {
      StoreOutputRow4<kVectorAccess>(
          c + static_cast<int64_t>(row) * args.ldc + col, args.n - col, acc4,
          args.alpha, args.beta);
    });
  }
};

// v6's, v7's and v8's main loop: K slices of kBlockK through registers into
// kStages (1 or 2) shared-memory stages, multiplied by the WarpTile.
template <int kBlockM,         // block tile rows (of C)
          int kBlockN,         // block tile columns (of C)
          int kBlockK,         // K slice staged in shared memory per step
          int kWarpM,          // warp tile rows
          int kWarpN,          // warp tile columns
          int kStages,         // 1: load then multiply; 2: overlap them
          bool kTransA,        // A is stored transposed (k x m)
          bool kTransB,        // B is stored transposed (n x k)
          bool kVectorAccess>  // global memory moves in float4s (else scalars)
struct RegisterStagedMainloop : WarpTile<kBlockM, kBlockN, kWarpM, kWarpN> {
  using Tile = WarpTile<kBlockM, kBlockN, kWarpM, kWarpN>;
  static constexpr int kThreads = Tile::kThreads;
  static_assert(kStages == 1 || kStages == 2, "one or two stages");
  static_assert(kBlockM * kBlockK / 4 == kThreads &&
                    kBlockK * kBlockN / 4 == kThreads,
                "one float4 of each tile per thread per load");
  static constexpr int kTileA = kBlockK * kBlockM;  // [k][m]: A transposed
  static constexpr int kTileB = kBlockK * kBlockN;  // [k][n]
  // Static shared memory the kernel declares (16-byte aligned) and passes.
  static constexpr int kSharedFloats = kStages * (kTileA + kTileB);

  __device__ __forceinline__ RegisterStagedMainloop(int block_row,
                                                    int block_col)
      : Tile(block_row, block_col) {}

  // Adds op(A) op(B) over k in [k_begin, k_end) to acc. `tiles`: the
  // block's kSharedFloats of shared memory.
  __device__ __forceinline__ void Accumulate(const SgemmArgs& args,
                                             const BatchMember& p, int k_begin,
                                             int k_end, float* tiles) {
    const int tid = threadIdx.x;
    // The float4 of each slice this thread loads: along K where the operand
    // is stored K-contiguous, else along m (A) or n (B).
    a_m_ = kTransA ? (tid % (kBlockM / 4)) * 4 : tid / (kBlockK / 4);
    a_k_ = kTransA ? tid / (kBlockM / 4) : (tid % (kBlockK / 4)) * 4;
    b_k_ = kTransB ? (tid % (kBlockK / 4)) * 4 : tid / (kBlockN / 4);
    b_n_ = kTransB ? tid / (kBlockK / 4) : (tid % (kBlockN / 4)) * 4;
    FragmentIterator iter_a(p.a, args.lda, !kTransA, this->block_row + a_m_,
                            args.m, k_begin + a_k_, kBlockK);
    FragmentIterator iter_b(p.b, args.ldb, kTransB, this->block_col + b_n_,
                            args.n, k_begin + b_k_, kBlockK);
    const int k_length = max(0, k_end - k_begin);
    const int full_tiles = k_length / kBlockK;
    const int slices = full_tiles + (full_tiles * kBlockK < k_length ? 1 : 0);
    const bool block_inside = this->block_row + kBlockM <= args.m &&
                              this->block_col + kBlockN <= args.n;
    // `load_full` reads one whole slice's float4s; the partial last slice
    // is read lane by lane.
    auto run = [&](auto load_full) {
      auto load = [&](int s, float4& a4, float4& b4) {
        if (s < full_tiles) {
          load_full(a4, b4);
        } else {
          // The iterators' k already counts k_begin.
          const int k0 = full_tiles * kBlockK;
          a4 = LoadLanes<kVectorAccess>(iter_a.ptr,
                                        iter_a.PartialTile(k0, k_end));
          b4 = LoadLanes<kVectorAccess>(iter_b.ptr,
                                        iter_b.PartialTile(k0, k_end));
        }
        iter_a.ptr += iter_a.step;
        iter_b.ptr += iter_b.step;
      };
      Pipeline(slices, tiles, load);
    };
    if (kVectorAccess && block_inside) {
      // Whole slices of an inside block: two unconditional 16-byte loads.
      run([&](float4& a4, float4& b4) {
        a4 = *reinterpret_cast<const float4*>(iter_a.ptr);
        b4 = *reinterpret_cast<const float4*>(iter_b.ptr);
      });
    } else {
      run([&](float4& a4, float4& b4) {
        a4 = LoadLanes<kVectorAccess>(iter_a.ptr, iter_a.full_tile);
        b4 = LoadLanes<kVectorAccess>(iter_b.ptr, iter_b.full_tile);
      });
    }
  }

 private:
  // Slices 0..slices-1 through the stages; load(s, a4, b4) reads slice s.
  template <typename Load>
  __device__ __forceinline__ void Pipeline(int slices, float* tiles,
                                           Load&& load) {
    float4 a4, b4;
    if constexpr (kStages == 1) {
      for (int s = 0; s < slices; ++s) {
        load(s, a4, b4);
        StageIn(tiles, a4, b4);
        __syncthreads();
        Multiply(tiles);
        __syncthreads();  // everyone is done reading before the next store
      }
    } else {
      if (slices == 0) return;
      load(0, a4, b4);
      StageIn(tiles, a4, b4);
      __syncthreads();
      for (int s = 0; s < slices; ++s) {
        const bool more = s + 1 < slices;
        if (more) load(s + 1, a4, b4);  // in flight during the multiply
        Multiply(Stage(tiles, s & 1));
        // The other stage was last read in iteration s - 1, before its
        // closing barrier: free to overwrite.
        if (more) StageIn(Stage(tiles, (s + 1) & 1), a4, b4);
        __syncthreads();
      }
    }
  }

  // Stage `stage`'s tiles: A's then B's.
  __device__ __forceinline__ static float* Stage(float* tiles, int stage) {
    return tiles + stage * (kTileA + kTileB);
  }

  // Stores this thread's float4 of each operand into the stage at `stage`
  // (A's m-contiguous float4 as is, a K-contiguous one spread over 4 rows).
  __device__ __forceinline__ void StageIn(float* stage, const float4& a4,
                                          const float4& b4) const {
    float* a = stage;
    float* b = stage + kTileA;
    if (kTransA) {
      *reinterpret_cast<float4*>(&a[a_k_ * kBlockM + a_m_]) = a4;
    } else {
      a[(a_k_ + 0) * kBlockM + a_m_] = a4.x;
      a[(a_k_ + 1) * kBlockM + a_m_] = a4.y;
      a[(a_k_ + 2) * kBlockM + a_m_] = a4.z;
      a[(a_k_ + 3) * kBlockM + a_m_] = a4.w;
    }
    if (kTransB) {
      b[(b_k_ + 0) * kBlockN + b_n_] = b4.x;
      b[(b_k_ + 1) * kBlockN + b_n_] = b4.y;
      b[(b_k_ + 2) * kBlockN + b_n_] = b4.z;
      b[(b_k_ + 3) * kBlockN + b_n_] = b4.w;
    } else {
      *reinterpret_cast<float4*>(&b[b_k_ * kBlockN + b_n_]) = b4;
    }
  }

  __device__ __forceinline__ void Multiply(const float* stage) {
    this->template MultiplySlice<kBlockK, kBlockM, kBlockN>(stage,
                                                            stage + kTileA);
  }

  // This thread's float4 of each slice: A's (m, k) and B's (k, n) corner.
  int a_m_ = 0, a_k_ = 0, b_k_ = 0, b_n_ = 0;
};

}  // namespace gemm::kernels::detail

#endif  // GEMM_KERNELS_SGEMM_WARP_TILE_CUH_
