// Algorithm-based fault tolerance (ABFT) for one GEMM, after Huang and
// Abraham (1984): a result C = alpha * op(A) * op(B) + beta * C_in is
// checked through its row and column sums, which the operands predict at a
// cost of O(MK + KN + MN) instead of the GEMM's O(MNK):
//
//   C * 1  =  alpha * op(A) * (op(B) * 1)  +  beta * C_in * 1      (rows)
//   1' * C =  alpha * (1' * op(A)) * op(B) +  beta * 1' * C_in     (columns)
//
// Every sum is accumulated in float64. A line (row or column) passes when
// its two sides differ by no more than the rounding that float32 arithmetic
// is allowed: the classic bound |fl(AB) - AB| <= gamma(K) |A| |B|
// (gamma(n) = n u / (1 - n u), u = 2^-24 for float32, any summation order,
// fused multiply-adds included), summed over the line, for the product and
// for the scaling by alpha and beta, plus float64's own error in the sums
// and an allowance for float32 underflow (flush-to-zero included). Clean
// results therefore never fail (no false positives, whatever the data),
// and a corruption is caught when it moves a line's sum by more than that
// line's bound plus the line's honest rounding error, which is at most the
// bound again. Lines whose predictions involve a NaN or infinity, or whose
// sums could overflow float32, cannot be judged and are left unchecked
// (Verdict::unchecked_lines): one NaN in B leaves every row unchecked, one
// in A every column, so a job with both is not checked at all.
//
// The executors compute the sums with the same passes (Reduce2D over
// stored matrices, OperandPasses for the order): the CPU backend with
// Reduce2DOnHost, the CUDA backend on the device (kernels/abft_checksums.h),
// which also uses Judge() below in its comparison kernel.
//
// Thread-safety: plain functions and value types.
//
//   std::vector<double> scratch(abft::Layout(p).slots(), 0.0);
//   for (const abft::Pass& pass : abft::OperandPasses(p, a, b, scratch.data()))
//     abft::Reduce2DOnHost(pass);
//   ... the GEMM, then OutputCPass, then abft::JudgeAll(p, scratch.data())
#ifndef GEMM_COMMON_ABFT_H_
#define GEMM_COMMON_ABFT_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/gemm_problem.h"

#if defined(__CUDACC__)
#define GEMM_ABFT_HD __host__ __device__
#else
#define GEMM_ABFT_HD
#endif

namespace gemm::abft {

// float32's unit roundoff, and the smallest normal float32 (results that
// underflow may be flushed to zero, losing up to this much each).
inline constexpr double kFloatUnitRoundoff = 1.0 / (1 << 24);
inline constexpr double kFloatMinNormal = 1.1754943508222875e-38;
inline constexpr double kFloatMax = 3.4028234663852886e+38;

// One line of C's check, all in float64. For row i: actual = sum_j C[i][j];
// ab = (op(A) * op(B) * 1)[i] and ab_abs the same with |op(A)| and |op(B)|;
// c_in and c_in_abs the input C's row sum and sum of magnitudes (0 when
// beta is 0). Columns likewise.
struct Line {
  double actual = 0;
  double ab = 0;
  double ab_abs = 0;
  double c_in = 0;
  double c_in_abs = 0;
};

// What the check allows for one line of `length` elements (N for a row, M
// for a column) of a product with inner dimension `k`.
// `input_roundoff` is the relative error of converting an input to the
// precision that ran (common/precision.h's InputUnitRoundoff; 0 for
// float32): each product of converted inputs is then off by up to
// (1 + input_roundoff)^2 - 1 before the float32 sums.
GEMM_ABFT_HD inline double Tolerance(const Line& line, double alpha,
                                     double beta, uint32_t k, uint32_t length,
                                     double input_roundoff = 0.0) {
  const double u = kFloatUnitRoundoff;
  // Roundings along one element's path: K products and sums in any order,
  // then alpha's scaling, beta's scaling and the final addition, with room
  // for a split-K reduction's few extra additions.
  const double n = static_cast<double>(k) + 8.0;
  const double inputs = (1.0 + input_roundoff) * (1.0 + input_roundoff);
  const double gamma = inputs * (1.0 + n * u / (1.0 - n * u)) - 1.0;
  const double magnitude = (alpha < 0 ? -alpha : alpha) * line.ab_abs +
                           (beta < 0 ? -beta : beta) * line.c_in_abs;
  // float64's error in the check's own sums: each side adds up about
  // (K + 2) * length terms, and the actual line `length` more.
  const double sum_terms = (static_cast<double>(k) + 2.0) * length + length;
  const double f64 = 4.0 * sum_terms * 1.1102230246251565e-16;
  // Underflow: each element may lose up to FLT_MIN per rounding.
  const double underflow =
      static_cast<double>(length) * (n + 2.0) * kFloatMinNormal *
      (1.0 + (alpha < 0 ? -alpha : alpha) + (beta < 0 ? -beta : beta));
  // (A clean line's actual sum is at most about `magnitude` too.)
  return gamma * magnitude + f64 * 2.0 * magnitude + underflow;
}

// How far a line is off, as a multiple of its tolerance: at most 1 passes.
// Negative when the line cannot be judged (NaN or infinite operands, or a
// line whose elements could overflow float32); +infinity when C holds a
// NaN or infinity the operands do not explain.
GEMM_ABFT_HD inline double Ratio(const Line& line, double alpha, double beta,
                                 uint32_t k, uint32_t length,
                                 double input_roundoff = 0.0) {
  const double expected = alpha * line.ab + beta * line.c_in;
  const double tolerance =
      Tolerance(line, alpha, beta, k, length, input_roundoff);
  // x - x != 0 exactly when x is NaN or infinite.
  if (expected - expected != 0 || tolerance - tolerance != 0) return -1;
  // Some element of the line, or a kernel's sum before alpha scales it,
  // may exceed float32's range: an infinity in C would then be right.
  const double magnitude = (alpha < 0 ? -alpha : alpha) * line.ab_abs +
                           (beta < 0 ? -beta : beta) * line.c_in_abs;
  const double largest = magnitude > line.ab_abs ? magnitude : line.ab_abs;
  if (largest * (1.0 + 1e-3) >= kFloatMax) return -1;
  if (line.actual - line.actual != 0) return 1.0 / 0.0;
  const double diff = line.actual - expected;
  return (diff < 0 ? -diff : diff) / tolerance;
}

// The screen: the line's deviation against its tolerance shrunk by
// 16 / sqrt((K + 8) * length) (never grown). Above 1 and with Ratio at
// most 1, the line is suspect and worth verifying; negative as Ratio.
GEMM_ABFT_HD inline double ScreenRatio(const Line& line, double alpha,
                                       double beta, uint32_t k, uint32_t length,
                                       double input_roundoff = 0.0) {
  const double ratio = Ratio(line, alpha, beta, k, length, input_roundoff);
  const double shrink =
      16.0 / sqrt((static_cast<double>(k) + 8.0) * static_cast<double>(length));
  return shrink < 1.0 ? ratio / shrink : ratio;
}

// The most suspect lines a job verifies element by element.
inline constexpr int kMaxVerifiedLines = 64;

// Where each quantity sits in a job's scratch of float64s (SlotCount() of
// them): four K-vectors, five M-vectors for the rows, five N-vectors for
// the columns, then the verdict's slots.
struct Layout {
  GEMM_ABFT_HD explicit Layout(const GemmProblem& p) : m(p.m), n(p.n), k(p.k) {}
  // Reductions of the operands along K.
  GEMM_ABFT_HD uint64_t b_row_sums() const { return 0; }      // op(B) * 1, K
  GEMM_ABFT_HD uint64_t b_row_abs() const { return k; }       // |op(B)| * 1, K
  GEMM_ABFT_HD uint64_t a_col_sums() const { return 2 * k; }  // 1' * op(A)
  GEMM_ABFT_HD uint64_t a_col_abs() const { return 3 * k; }   // 1' * |op(A)|
  // Per row (M each) and per column (N each): Line's five fields.
  GEMM_ABFT_HD uint64_t row(int field) const { return 4 * k + field * m; }
  GEMM_ABFT_HD uint64_t col(int field) const {
    return 4 * k + 5 * m + field * n;
  }
  // The verdict: see Verdict's fields.
  GEMM_ABFT_HD uint64_t verdict() const { return 4 * k + 5 * m + 5 * n; }
  // The suspect lines to verify (the device's list; kVerdictSuspect counts
  // them, the first kMaxVerifiedLines are listed), then a flag per listed
  // line that its verification found it wrong.
  GEMM_ABFT_HD uint64_t suspects() const { return verdict() + kVerdictSlots; }
  GEMM_ABFT_HD uint64_t suspect_flags() const {
    return suspects() + kMaxVerifiedLines;
  }
  GEMM_ABFT_HD uint64_t slots() const {
    return suspect_flags() + kMaxVerifiedLines;
  }

  static constexpr int kActual = 0, kAb = 1, kAbAbs = 2, kCIn = 3, kCInAbs = 4;
  static constexpr int kVerdictSlots = 4;
  uint64_t m, n, k;
};

// One pass over a stored (row-major, packed) rows x cols matrix X:
//   row[i]     += sum_j X[i][j] * col_weight[j]
//   row_abs[i] += sum_j |X[i][j]| * col_weight_abs[j]
//   col[j]     += sum_i row_weight[i] * X[i][j]
//   col_abs[j] += sum_i row_weight_abs[i] * |X[i][j]|
// A null weight is all ones; a null output is not computed.
struct Pass {
  const float* x = nullptr;
  uint64_t rows = 0, cols = 0;
  const double* row_weight = nullptr;
  const double* row_weight_abs = nullptr;
  const double* col_weight = nullptr;
  const double* col_weight_abs = nullptr;
  double* row = nullptr;
  double* row_abs = nullptr;
  double* col = nullptr;
  double* col_abs = nullptr;
};

// The passes that compute the check's predictions, in the order they must
// run (each uses the previous ones' results), given A and B as stored and
// `scratch` laid out as Layout says (zeroed): 1' * op(A); then op(B) * 1 and
// (1' * op(A)) * op(B); then op(A) * (op(B) * 1). A is read twice, B once.
std::vector<Pass> OperandPasses(const GemmProblem& p, const float* a,
                                const float* b, double* scratch);
// The input C's row and column sums (only when beta is not 0; run before
// the GEMM overwrites C).
Pass InputCPass(const GemmProblem& p, const float* c, double* scratch);
// The result's row and column sums.
Pass OutputCPass(const GemmProblem& p, const float* c, double* scratch);

// Runs a pass on the host.
void Reduce2DOnHost(const Pass& pass);

// A job's operands as stored (packed: lda(), ldb(), ldc()), for verifying
// suspect lines: A, B, the result C, and the input C (null: not kept, and
// then a job with beta not 0 is not verified).
struct Operands {
  const float* a = nullptr;
  const float* b = nullptr;
  const float* c = nullptr;
  const float* c_in = nullptr;
};

// Verifies line `line` (row i is i, column j is M + j) element by element:
// each recomputed in float64 with its own magnitude and judged by Ratio
// with length 1. Returns the largest element ratio (above 1: the line is
// wrong; negative: no element could be judged), and where in `element`
// (its index along the line) when not null.
double VerifyLine(const GemmProblem& p, const Operands& x, uint64_t line,
                  double input_roundoff = 0.0, uint64_t* element = nullptr);

// The outcome of one job's check.
struct Verdict {
  // Lines (rows and columns) over their tolerance.
  uint64_t bad_lines = 0;
  // Lines that could not be judged (see Ratio).
  uint64_t unchecked_lines = 0;
  // The largest ratio over the judged lines (0 when none), and where: row
  // i is i, column j is M + j. A verified line counts with its worst
  // element's ratio.
  double worst_ratio = 0;
  uint64_t worst_line = 0;
  // Lines that passed the bound but not the screen, and how many of them
  // were verified element by element (at most kMaxVerifiedLines).
  uint64_t suspect_lines = 0;
  uint64_t verified_lines = 0;

  bool ok() const { return bad_lines == 0; }
};

// Line `line` (row i is i, column j is M + j) of a job's filled scratch,
// with its length (N for a row, M for a column).
Line LineOf(const GemmProblem& p, const double* scratch, uint64_t line,
            uint32_t* length);

// What line `line` may honestly be off its prediction by, plus its
// tolerance: a change to one of its elements larger than this is caught.
double Slack(const GemmProblem& p, const double* scratch, uint64_t line,
             double input_roundoff = 0.0);

// Judges every row and column from a job's filled scratch; with the
// operands, verifies the suspect lines too (the two stages above).
Verdict JudgeAll(const GemmProblem& p, const double* scratch,
                 double input_roundoff = 0.0);
Verdict JudgeAll(const GemmProblem& p, const double* scratch,
                 const Operands& operands, double input_roundoff = 0.0);

// Reads the verdict slots (Layout::verdict() on) that the device's
// comparison filled.
Verdict VerdictFromSlots(const double* slots);

// The slots of a verdict as the device's comparison fills them: four
// 64-bit words (bad lines, unchecked lines, the worst line packed as the
// float32 bits of its ratio above its index, and the suspect lines).
inline constexpr int kVerdictBad = 0, kVerdictUnchecked = 1, kVerdictWorst = 2,
                     kVerdictSuspect = 3;

// "row 17" or "column 3" for a Verdict's worst_line.
std::string LineName(const GemmProblem& p, uint64_t line);

}  // namespace gemm::abft

#endif  // GEMM_COMMON_ABFT_H_
