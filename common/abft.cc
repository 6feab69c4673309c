#include "common/abft.h"

#include <cmath>
#include <cstring>

namespace gemm::abft {
namespace {

// Folds one line's ratio into the verdict.
void Count(double ratio, uint64_t line, Verdict& v) {
  if (ratio < 0) {
    ++v.unchecked_lines;
    return;
  }
  if (ratio > 1) ++v.bad_lines;
  if (ratio > v.worst_ratio || (v.worst_ratio == 0 && line == 0)) {
    v.worst_ratio = ratio;
    v.worst_line = line;
  }
}

}  // namespace

Line LineOf(const GemmProblem& p, const double* scratch, uint64_t line,
            uint32_t* length) {
  const Layout l(p);
  const bool is_row = line < p.m;
  const uint64_t i = is_row ? line : line - p.m;
  auto at = [&](int field) {
    return scratch[(is_row ? l.row(field) : l.col(field)) + i];
  };
  *length = is_row ? p.n : p.m;
  Line ln;
  ln.actual = at(Layout::kActual);
  ln.ab = at(Layout::kAb);
  ln.ab_abs = at(Layout::kAbAbs);
  ln.c_in = at(Layout::kCIn);
  ln.c_in_abs = at(Layout::kCInAbs);
  return ln;
}

double Slack(const GemmProblem& p, const double* scratch, uint64_t line,
             double input_roundoff) {
  uint32_t length = 0;
  const Line ln = LineOf(p, scratch, line, &length);
  const double error =
      std::fabs(ln.actual - (p.alpha * ln.ab + p.beta * ln.c_in));
  return error + Tolerance(ln, p.alpha, p.beta, p.k, length, input_roundoff);
}

std::vector<Pass> OperandPasses(const GemmProblem& p, const float* a,
                                const float* b, double* scratch) {
  const Layout l(p);
  double* s = scratch;
  std::vector<Pass> passes(3);
  // 1' * op(A): A's column sums as stored M x K, its row sums as K x M.
  Pass& a_sums = passes[0];
  a_sums.x = a;
  if (!p.trans_a) {
    a_sums.rows = p.m, a_sums.cols = p.k;
    a_sums.col = s + l.a_col_sums(), a_sums.col_abs = s + l.a_col_abs();
  } else {
    a_sums.rows = p.k, a_sums.cols = p.m;
    a_sums.row = s + l.a_col_sums(), a_sums.row_abs = s + l.a_col_abs();
  }
  // op(B) * 1 and (1' * op(A)) * op(B) in one reading of B.
  Pass& b_pass = passes[1];
  b_pass.x = b;
  if (!p.trans_b) {
    b_pass.rows = p.k, b_pass.cols = p.n;
    b_pass.row = s + l.b_row_sums(), b_pass.row_abs = s + l.b_row_abs();
    b_pass.row_weight = s + l.a_col_sums();
    b_pass.row_weight_abs = s + l.a_col_abs();
    b_pass.col = s + l.col(Layout::kAb);
    b_pass.col_abs = s + l.col(Layout::kAbAbs);
  } else {
    b_pass.rows = p.n, b_pass.cols = p.k;
    b_pass.col = s + l.b_row_sums(), b_pass.col_abs = s + l.b_row_abs();
    b_pass.col_weight = s + l.a_col_sums();
    b_pass.col_weight_abs = s + l.a_col_abs();
    b_pass.row = s + l.col(Layout::kAb);
    b_pass.row_abs = s + l.col(Layout::kAbAbs);
  }
  // op(A) * (op(B) * 1).
  Pass& a_rows = passes[2];
  a_rows.x = a;
  if (!p.trans_a) {
    a_rows.rows = p.m, a_rows.cols = p.k;
    a_rows.col_weight = s + l.b_row_sums();
    a_rows.col_weight_abs = s + l.b_row_abs();
    a_rows.row = s + l.row(Layout::kAb);
    a_rows.row_abs = s + l.row(Layout::kAbAbs);
  } else {
    a_rows.rows = p.k, a_rows.cols = p.m;
    a_rows.row_weight = s + l.b_row_sums();
    a_rows.row_weight_abs = s + l.b_row_abs();
    a_rows.col = s + l.row(Layout::kAb);
    a_rows.col_abs = s + l.row(Layout::kAbAbs);
  }
  return passes;
}

Pass InputCPass(const GemmProblem& p, const float* c, double* scratch) {
  const Layout l(p);
  Pass pass;
  pass.x = c;
  pass.rows = p.m, pass.cols = p.n;
  pass.row = scratch + l.row(Layout::kCIn);
  pass.row_abs = scratch + l.row(Layout::kCInAbs);
  pass.col = scratch + l.col(Layout::kCIn);
  pass.col_abs = scratch + l.col(Layout::kCInAbs);
  return pass;
}

Pass OutputCPass(const GemmProblem& p, const float* c, double* scratch) {
  const Layout l(p);
  Pass pass;
  pass.x = c;
  pass.rows = p.m, pass.cols = p.n;
  pass.row = scratch + l.row(Layout::kActual);
  pass.col = scratch + l.col(Layout::kActual);
  return pass;
}

void Reduce2DOnHost(const Pass& p) {
  for (uint64_t i = 0; i < p.rows; ++i) {
    const float* x = p.x + i * p.cols;
    const double wr = p.row_weight ? p.row_weight[i] : 1.0;
    const double wra = p.row_weight_abs ? p.row_weight_abs[i] : 1.0;
    double row = 0, row_abs = 0;
    for (uint64_t j = 0; j < p.cols; ++j) {
      const double v = x[j];
      const double mag = std::fabs(v);
      if (p.row != nullptr) row += v * (p.col_weight ? p.col_weight[j] : 1.0);
      if (p.row_abs != nullptr) {
        row_abs += mag * (p.col_weight_abs ? p.col_weight_abs[j] : 1.0);
      }
      if (p.col != nullptr) p.col[j] += wr * v;
      if (p.col_abs != nullptr) p.col_abs[j] += wra * mag;
    }
    if (p.row != nullptr) p.row[i] += row;
    if (p.row_abs != nullptr) p.row_abs[i] += row_abs;
  }
}

double VerifyLine(const GemmProblem& p, const Operands& x, uint64_t line,
                  double input_roundoff, uint64_t* element) {
  const bool is_row = line < p.m;
  const uint64_t fixed = is_row ? line : line - p.m;
  const uint64_t length = is_row ? p.n : p.m;
  const uint64_t lda = p.lda(), ldb = p.ldb(), ldc = p.ldc();
  auto op_a = [&](uint64_t i, uint64_t k) {
    return static_cast<double>(p.trans_a ? x.a[k * lda + i] : x.a[i * lda + k]);
  };
  auto op_b = [&](uint64_t k, uint64_t j) {
    return static_cast<double>(p.trans_b ? x.b[j * ldb + k] : x.b[k * ldb + j]);
  };
  double worst = -1;
  for (uint64_t e = 0; e < length; ++e) {
    const uint64_t i = is_row ? fixed : e, j = is_row ? e : fixed;
    Line one;
    for (uint64_t k = 0; k < p.k; ++k) {
      const double product = op_a(i, k) * op_b(k, j);
      one.ab += product;
      one.ab_abs += std::fabs(product);
    }
    one.actual = x.c[i * ldc + j];
    if (p.beta != 0.0f) {
      one.c_in = x.c_in[i * ldc + j];
      one.c_in_abs = std::fabs(one.c_in);
    }
    const double ratio =
        Ratio(one, p.alpha, p.beta, p.k, /*length=*/1, input_roundoff);
    if (ratio > worst) {
      worst = ratio;
      if (element != nullptr) *element = e;
    }
  }
  return worst;
}

Verdict JudgeAll(const GemmProblem& p, const double* scratch,
                 double input_roundoff) {
  return JudgeAll(p, scratch, Operands{}, input_roundoff);
}

Verdict JudgeAll(const GemmProblem& p, const double* scratch,
                 const Operands& operands, double input_roundoff) {
  const bool can_verify = operands.a != nullptr && operands.b != nullptr &&
                          operands.c != nullptr &&
                          (p.beta == 0.0f || operands.c_in != nullptr);
  Verdict v;
  for (uint64_t line = 0; line < uint64_t{p.m} + p.n; ++line) {
    uint32_t length = 0;
    const Line ln = LineOf(p, scratch, line, &length);
    double ratio = Ratio(ln, p.alpha, p.beta, p.k, length, input_roundoff);
    if (can_verify && ratio >= 0 && ratio <= 1 &&
        ScreenRatio(ln, p.alpha, p.beta, p.k, length, input_roundoff) > 1) {
      if (++v.suspect_lines <= kMaxVerifiedLines) {
        ++v.verified_lines;
        const double verified = VerifyLine(p, operands, line, input_roundoff);
        // A line with no judgeable element keeps its line ratio.
        if (verified > 1) ratio = verified;
      }
    }
    Count(ratio, line, v);
  }
  return v;
}

Verdict VerdictFromSlots(const double* slots) {
  uint64_t words[Layout::kVerdictSlots];
  std::memcpy(words, slots, sizeof(words));
  Verdict v;
  v.bad_lines = words[kVerdictBad];
  v.unchecked_lines = words[kVerdictUnchecked];
  v.suspect_lines = words[kVerdictSuspect];
  v.verified_lines =
      v.suspect_lines < kMaxVerifiedLines ? v.suspect_lines : kMaxVerifiedLines;
  float ratio;
  const uint32_t bits = static_cast<uint32_t>(words[kVerdictWorst] >> 32);
  std::memcpy(&ratio, &bits, sizeof(ratio));
  v.worst_ratio = ratio;
  v.worst_line = words[kVerdictWorst] & 0xffffffffu;
  return v;
}

std::string LineName(const GemmProblem& p, uint64_t line) {
  return line < p.m ? "row " + std::to_string(line)
                    : "column " + std::to_string(line - p.m);
}

}  // namespace gemm::abft
