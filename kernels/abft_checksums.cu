// The ABFT check's kernels: Reduce2D (one pass of abft::Pass over a stored
// matrix, for every member of a batch), Compare (every row and column
// judged by abft::Ratio, folded into the member's verdict slots, suspect
// lines listed) and Verify (the suspect lines element by element).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/abft.h"
#include "kernels/abft_checksums.h"

namespace gemm::kernels {
namespace {

// Reduce2D's block tile: kTileCols columns by kTileRows rows. Each lane
// owns kColsPerLane columns (one 16-byte load per row where rows are
// 16-byte aligned, else four loads 32 columns apart; either way a warp's
// loads of one row are coalesced) and keeps their column sums in registers;
// each warp loads kRowsPerStep rows before it reduces any, so that enough
// bytes are in flight to keep HBM busy, then adds each row's sum across
// its lanes.
constexpr int kWarps = 8;
constexpr int kColsPerLane = 4;
constexpr int kTileCols = 32 * kColsPerLane;
constexpr int kRowsPerStep = 8;
constexpr int kTileRows = 2 * kWarps * kRowsPerStep;
constexpr int kMaxGridZ = 65535;

// Sums each of the warp's kValues values across its 32 lanes at once
// (a reduce-scatter: each step halves the values a lane holds, so 16 values
// take 16 exchanges instead of 80). Returns the sum this lane ends with:
// value number ReducedIndex(lane), which lanes lane and lane ^ 1 both hold.
constexpr int kValues = 16;
// One step: the lanes `offset` apart swap halves of their first 2 * kHalf
// values and keep the sums of the half they hold on to.
template <int kHalf>
__device__ void ReduceScatterStep(double (&v)[kValues], int lane, int offset) {
  const bool upper = lane & offset;
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    const double send = upper ? v[i] : v[i + kHalf];
    const double keep = upper ? v[i + kHalf] : v[i];
    v[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
  }
}
__device__ double WarpReduceScatter(double (&v)[kValues], int lane) {
  static_assert(kValues == 16, "five steps: 8, 4, 2, 1 values, then pairs");
  ReduceScatterStep<8>(v, lane, 16);
  ReduceScatterStep<4>(v, lane, 8);
  ReduceScatterStep<2>(v, lane, 4);
  ReduceScatterStep<1>(v, lane, 2);
  return v[0] + __shfl_xor_sync(0xffffffffu, v[0], 1);
}
__device__ int ReducedIndex(int lane) {
  return ((lane >> 4) & 1) * 8 + ((lane >> 3) & 1) * 4 + ((lane >> 2) & 1) * 2 +
         ((lane >> 1) & 1);
}

// Member blockIdx.z of the batch: X starts x_stride floats further, and
// every float64 vector (weights and outputs) scratch_stride doubles.
// kVector: every row of X starts 16-byte aligned (cols % 4 == 0).
template <bool kVector>
__global__ void __launch_bounds__(kWarps * 32, 2)
    Reduce2D(abft::Pass p, int64_t x_stride, int64_t scratch_stride) {
  const int64_t z = blockIdx.z;
  auto member = [z, scratch_stride](auto* v) {
    return v == nullptr ? v : v + z * scratch_stride;
  };
  const float* x = p.x + z * x_stride;
  const double* row_weight = member(p.row_weight);
  const double* row_weight_abs = member(p.row_weight_abs);
  const double* col_weight = member(p.col_weight);
  const double* col_weight_abs = member(p.col_weight_abs);
  double* row = member(p.row);
  double* row_abs = member(p.row_abs);
  double* col = member(p.col);
  double* col_abs = member(p.col_abs);

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const uint64_t col0 = uint64_t{blockIdx.x} * kTileCols;
  auto column = [col0, lane](int v) -> uint64_t {
    return kVector ? col0 + 4 * lane + v : col0 + lane + 32 * v;
  };

  double wc[kColsPerLane], wca[kColsPerLane];
  double col_sum[kColsPerLane], col_sum_abs[kColsPerLane];
#pragma unroll
  for (int v = 0; v < kColsPerLane; ++v) {
    const uint64_t c = column(v);
    const bool in = c < p.cols;
    wc[v] = !in ? 0.0 : col_weight ? col_weight[c] : 1.0;
    wca[v] = !in ? 0.0 : col_weight_abs ? col_weight_abs[c] : 1.0;
    col_sum[v] = col_sum_abs[v] = 0.0;
  }
  // Row tiles blockIdx.y, blockIdx.y + gridDim.y, ...: the grid's y
  // dimension may be smaller than the number of tiles.
  const uint64_t row_tiles = (p.rows + kTileRows - 1) / kTileRows;
  for (uint64_t tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
    const uint64_t row_end = min(p.rows, (tile + 1) * kTileRows);
    for (uint64_t base = tile * kTileRows + warp; base < row_end;
         base += kWarps * kRowsPerStep) {
      // Step u's row is base + kWarps * u: the same for the whole warp.
      float values[kRowsPerStep][kColsPerLane];
      double wr[kRowsPerStep], wra[kRowsPerStep];
#pragma unroll
      for (int u = 0; u < kRowsPerStep; ++u) {
        const uint64_t r = base + kWarps * u;
        const float* xr = x + r * p.cols;
        const bool in = r < row_end;
        wr[u] = !in ? 0.0 : row_weight ? row_weight[r] : 1.0;
        wra[u] = !in ? 0.0 : row_weight_abs ? row_weight_abs[r] : 1.0;
        if (kVector) {
          float4 q = make_float4(0.f, 0.f, 0.f, 0.f);
          if (r < row_end && column(0) < p.cols) {
            q = *reinterpret_cast<const float4*>(xr + column(0));
          }
          values[u][0] = q.x, values[u][1] = q.y;
          values[u][2] = q.z, values[u][3] = q.w;
        } else {
#pragma unroll
          for (int v = 0; v < kColsPerLane; ++v) {
            values[u][v] =
                r < row_end && column(v) < p.cols ? xr[column(v)] : 0.0f;
          }
        }
      }
      // Row sums: values 0..7 (sum) and 8..15 (magnitudes) of the step's
      // rows. Rows past the end hold zeros and are not written.
      double sums[kValues];
#pragma unroll
      for (int u = 0; u < kRowsPerStep; ++u) {
        double sum = 0.0, sum_abs = 0.0;
#pragma unroll
        for (int v = 0; v < kColsPerLane; ++v) {
          const double value = values[u][v];
          const double magnitude = fabs(value);
          sum += value * wc[v];
          sum_abs += magnitude * wca[v];
          col_sum[v] += wr[u] * value;
          col_sum_abs[v] += wra[u] * magnitude;
        }
        sums[u] = sum;
        sums[kRowsPerStep + u] = sum_abs;
      }
      if (row != nullptr || row_abs != nullptr) {
        const double total = WarpReduceScatter(sums, lane);
        const int index = ReducedIndex(lane);
        const uint64_t r = base + kWarps * (index % kRowsPerStep);
        double* out = index < kRowsPerStep ? row : row_abs;
        if ((lane & 1) == 0 && r < row_end && out != nullptr) {
          atomicAdd(out + r, total);
        }
      }
    }
  }
  if (col == nullptr && col_abs == nullptr) return;
  // The warps' column sums, added up across the block, then one atomic per
  // column and block.
  __shared__ double partial[2][kWarps][kTileCols];
#pragma unroll
  for (int v = 0; v < kColsPerLane; ++v) {
    partial[0][warp][column(v) - col0] = col_sum[v];
    partial[1][warp][column(v) - col0] = col_sum_abs[v];
  }
  __syncthreads();
  for (int t = threadIdx.x; t < kTileCols; t += blockDim.x) {
    const uint64_t c = col0 + t;
    if (c >= p.cols) continue;
    double s = 0.0, s_abs = 0.0;
    for (int w = 0; w < kWarps; ++w) {
      s += partial[0][w][t];
      s_abs += partial[1][w][t];
    }
    if (col != nullptr) atomicAdd(col + c, s);
    if (col_abs != nullptr) atomicAdd(col_abs + c, s_abs);
  }
}

// Judges line blockIdx.x * blockDim.x + threadIdx.x (rows, then columns)
// of member blockIdx.z into its verdict slots. blockDim.x is a multiple of
// 32, and every lane takes part in its warp's reduction.
__global__ void Compare(GemmProblem p, double* scratch, int64_t scratch_stride,
                        double input_roundoff) {
  const uint64_t line = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const bool valid = line < uint64_t{p.m} + p.n;
  double* s = scratch + blockIdx.z * scratch_stride;
  const abft::Layout l(p);
  // -2: no line here (past the last); Ratio gives -1 for an unjudged one.
  double ratio = -2.0;
  if (valid) {
    const bool is_row = line < p.m;
    const uint64_t i = is_row ? line : line - p.m;
    auto at = [&](int field) {
      return s[(is_row ? l.row(field) : l.col(field)) + i];
    };
    abft::Line ln;
    ln.actual = at(abft::Layout::kActual);
    ln.ab = at(abft::Layout::kAb);
    ln.ab_abs = at(abft::Layout::kAbAbs);
    ln.c_in = at(abft::Layout::kCIn);
    ln.c_in_abs = at(abft::Layout::kCInAbs);
    const uint32_t length = is_row ? p.n : p.m;
    ratio = abft::Ratio(ln, p.alpha, p.beta, p.k, length, input_roundoff);
    // Suspect (common/abft.h): listed for Verify, the first
    // kMaxVerifiedLines of them. Without the input C (beta not 0), none.
    if (ratio >= 0 && ratio <= 1 && p.beta == 0.0f &&
        abft::ScreenRatio(ln, p.alpha, p.beta, p.k, length, input_roundoff) >
            1) {
      auto* words = reinterpret_cast<unsigned long long*>(s + l.verdict());
      const unsigned long long index =
          atomicAdd(&words[abft::kVerdictSuspect], 1ull);
      if (index < abft::kMaxVerifiedLines) {
        s[l.suspects() + index] = static_cast<double>(line);
      }
    }
  }
  // Non-negative floats order as their bits do.
  const bool judged = ratio >= 0;
  const float r = judged ? static_cast<float>(ratio) : 0.0f;
  unsigned long long packed =
      judged
          ? (static_cast<unsigned long long>(__float_as_uint(r)) << 32) | line
          : 0ull;
  // One atomic per warp and word, not per line: they all hit one address.
  constexpr unsigned kAll = 0xffffffffu;
  const unsigned unchecked = __popc(__ballot_sync(kAll, valid && !judged));
  const unsigned bad = __popc(__ballot_sync(kAll, ratio > 1));
  const unsigned any_judged = __ballot_sync(kAll, judged);
  for (int offset = 16; offset > 0; offset /= 2) {
    const unsigned long long other = __shfl_xor_sync(kAll, packed, offset);
    packed = other > packed ? other : packed;
  }
  if (threadIdx.x % 32 != 0) return;
  auto* words = reinterpret_cast<unsigned long long*>(s + l.verdict());
  if (unchecked > 0) atomicAdd(&words[abft::kVerdictUnchecked], unchecked);
  if (bad > 0) atomicAdd(&words[abft::kVerdictBad], bad);
  if (any_judged != 0) atomicMax(&words[abft::kVerdictWorst], packed);
}

// Verifies suspect line number blockIdx.x of member blockIdx.z (beta is 0)
// element by element, as abft::VerifyLine does on the host: each element
// recomputed in float64 with its own magnitude and judged by abft::Ratio
// with length 1. Block blockIdx.y takes elements blockIdx.y * blockDim.x
// on, one a thread; the first block to find an element over 1 counts the
// line bad (its flag), every such block offers its worst to the verdict.
__global__ void Verify(GemmProblem p, const float* a, int64_t stride_a,
                       const float* b, int64_t stride_b, const float* c,
                       int64_t stride_c, double* scratch,
                       int64_t scratch_stride, double input_roundoff) {
  double* s = scratch + blockIdx.z * scratch_stride;
  const abft::Layout l(p);
  auto* words = reinterpret_cast<unsigned long long*>(s + l.verdict());
  const unsigned long long listed = words[abft::kVerdictSuspect];
  if (blockIdx.x >= listed || blockIdx.x >= abft::kMaxVerifiedLines) return;
  const uint64_t line = static_cast<uint64_t>(s[l.suspects() + blockIdx.x]);
  const bool is_row = line < p.m;
  const uint64_t length = is_row ? p.n : p.m;
  const uint64_t e = uint64_t{blockIdx.y} * blockDim.x + threadIdx.x;
  if (uint64_t{blockIdx.y} * blockDim.x >= length) return;  // whole block
  a += blockIdx.z * stride_a;
  b += blockIdx.z * stride_b;
  c += blockIdx.z * stride_c;
  // Packed strides (GemmProblem's lda(), ldb(), ldc() are host code).
  const uint64_t lda = p.trans_a ? p.m : p.k, ldb = p.trans_b ? p.k : p.n,
                 ldc = p.n;
  double worst = -1;
  if (e < length) {
    const uint64_t fixed = is_row ? line : line - p.m;
    const uint64_t i = is_row ? fixed : e, j = is_row ? e : fixed;
    abft::Line one;
    for (uint64_t k = 0; k < p.k; ++k) {
      const double x = p.trans_a ? a[k * lda + i] : a[i * lda + k];
      const double y = p.trans_b ? b[j * ldb + k] : b[k * ldb + j];
      one.ab = fma(x, y, one.ab);
      one.ab_abs = fma(fabs(x), fabs(y), one.ab_abs);
    }
    one.actual = c[i * ldc + j];
    worst = abft::Ratio(one, p.alpha, p.beta, p.k, 1, input_roundoff);
  }
  // The block's largest ratio.
  __shared__ double warps[32];
  for (int offset = 16; offset > 0; offset /= 2) {
    worst = fmax(worst, __shfl_xor_sync(0xffffffffu, worst, offset));
  }
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = worst;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < blockDim.x / 32; ++w) worst = fmax(worst, warps[w]);
  if (worst <= 1) return;
  auto* flags = reinterpret_cast<unsigned long long*>(s + l.suspect_flags());
  if (atomicExch(&flags[blockIdx.x], 1ull) == 0) {
    atomicAdd(&words[abft::kVerdictBad], 1ull);
  }
  const float r = static_cast<float>(worst);
  atomicMax(&words[abft::kVerdictWorst],
            (static_cast<unsigned long long>(__float_as_uint(r)) << 32) | line);
}

cudaError_t LaunchReduce2D(const abft::Pass& pass, int count, int64_t x_stride,
                           int64_t scratch_stride, cudaStream_t stream) {
  if (pass.rows == 0 || pass.cols == 0) return cudaSuccess;
  for (int first = 0; first < count; first += kMaxGridZ) {
    abft::Pass part = pass;
    auto shift = [&](auto* v) {
      return v == nullptr ? v : v + first * scratch_stride;
    };
    part.x += first * x_stride;
    part.row_weight = shift(part.row_weight);
    part.row_weight_abs = shift(part.row_weight_abs);
    part.col_weight = shift(part.col_weight);
    part.col_weight_abs = shift(part.col_weight_abs);
    part.row = shift(part.row);
    part.row_abs = shift(part.row_abs);
    part.col = shift(part.col);
    part.col_abs = shift(part.col_abs);
    const uint64_t row_tiles = (pass.rows + kTileRows - 1) / kTileRows;
    const dim3 grid((pass.cols + kTileCols - 1) / kTileCols,
                    std::min<uint64_t>(row_tiles, kMaxGridZ),
                    std::min(kMaxGridZ, count - first));
    // 16-byte rows: every member's X and every row start on 16 bytes.
    const bool vector = reinterpret_cast<uintptr_t>(pass.x) % 16 == 0 &&
                        pass.cols % 4 == 0 && x_stride % 4 == 0;
    if (vector) {
      Reduce2D<true>
          <<<grid, kWarps * 32, 0, stream>>>(part, x_stride, scratch_stride);
    } else {
      Reduce2D<false>
          <<<grid, kWarps * 32, 0, stream>>>(part, x_stride, scratch_stride);
    }
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchAbftPrepare(const AbftBatch& batch, cudaStream_t stream) {
  const GemmProblem& p = batch.problem;
  cudaError_t err = cudaMemsetAsync(
      batch.scratch, 0, sizeof(double) * batch.stride_scratch * batch.count,
      stream);
  if (err != cudaSuccess || p.beta == 0.0f) return err;
  return LaunchReduce2D(abft::InputCPass(p, batch.c, batch.scratch),
                        batch.count, batch.stride_c, batch.stride_scratch,
                        stream);
}

cudaError_t LaunchAbftPredict(const AbftBatch& batch, cudaStream_t stream) {
  const GemmProblem& p = batch.problem;
  cudaError_t err = cudaSuccess;
  const std::vector<abft::Pass> passes =
      abft::OperandPasses(p, batch.a, batch.b, batch.scratch);
  // Passes over A take A's stride; the one over B, B's.
  const int64_t strides[] = {batch.stride_a, batch.stride_b, batch.stride_a};
  for (size_t i = 0; i < passes.size(); ++i) {
    err = LaunchReduce2D(passes[i], batch.count, strides[i],
                         batch.stride_scratch, stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t LaunchAbftJudge(const AbftBatch& batch, cudaStream_t stream) {
  const GemmProblem& p = batch.problem;
  cudaError_t err =
      LaunchReduce2D(abft::OutputCPass(p, batch.c, batch.scratch), batch.count,
                     batch.stride_c, batch.stride_scratch, stream);
  if (err != cudaSuccess) return err;
  constexpr int kThreads = 256;
  const uint64_t lines = uint64_t{p.m} + p.n;
  for (int first = 0; first < batch.count; first += kMaxGridZ) {
    const dim3 grid((lines + kThreads - 1) / kThreads, 1,
                    std::min(kMaxGridZ, batch.count - first));
    Compare<<<grid, kThreads, 0, stream>>>(
        p, batch.scratch + first * batch.stride_scratch, batch.stride_scratch,
        batch.input_roundoff);
  }
  if (p.beta != 0.0f || !batch.verify) return cudaGetLastError();
  // The suspect lines Compare listed (most blocks find none and return).
  for (int first = 0; first < batch.count; first += kMaxGridZ) {
    // Enough blocks along y for the longer kind of line.
    const uint64_t longest = std::max(p.m, p.n);
    const dim3 grid(abft::kMaxVerifiedLines,
                    static_cast<unsigned>((longest + kThreads - 1) / kThreads),
                    std::min(kMaxGridZ, batch.count - first));
    Verify<<<grid, kThreads, 0, stream>>>(
        p, batch.a + first * batch.stride_a, batch.stride_a,
        batch.b + first * batch.stride_b, batch.stride_b,
        batch.c + first * batch.stride_c, batch.stride_c,
        batch.scratch + first * batch.stride_scratch, batch.stride_scratch,
        batch.input_roundoff);
  }
  return cudaGetLastError();
}

}  // namespace gemm::kernels
