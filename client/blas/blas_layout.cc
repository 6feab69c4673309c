#include "client/blas/blas_layout.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace gemm::client {
namespace {

// BLAS's transpose letters: N (none), T or C (transpose; conjugation means
// nothing for real matrices).
bool ParseTranspose(char letter, bool* transpose) {
  switch (std::toupper(static_cast<unsigned char>(letter))) {
    case 'N':
      *transpose = false;
      return true;
    case 'T':
    case 'C':
      *transpose = true;
      return true;
    default:
      return false;
  }
}

}  // namespace

StridedGemm FromColumnMajor(char transa, char transb, int64_t m, int64_t n,
                            int64_t k, float alpha, const float* a, int64_t lda,
                            const float* b, int64_t ldb, float beta, float* c,
                            int64_t ldc) {
  bool trans_a = false, trans_b = false;
  const bool known =
      ParseTranspose(transa, &trans_a) && ParseTranspose(transb, &trans_b);
  // C^T = op(B)^T op(A)^T: B's memory is the row-major left operand, with
  // its transpose, and A's the right one.
  StridedGemm g = FromRowMajor(trans_b, trans_a, n, m, k, alpha, b, ldb, a, lda,
                               beta, c, ldc);
  g.known_transposes = known;
  return g;
}

StridedGemm FromRowMajor(bool trans_a, bool trans_b, int64_t m, int64_t n,
                         int64_t k, float alpha, const float* a, int64_t lda,
                         const float* b, int64_t ldb, float beta, float* c,
                         int64_t ldc) {
  StridedGemm g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = alpha;
  g.beta = beta;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.c = c;
  g.ldc = ldc;
  return g;
}

int64_t StoredRowsA(const StridedGemm& g) { return g.trans_a ? g.k : g.m; }
int64_t StoredColsA(const StridedGemm& g) { return g.trans_a ? g.m : g.k; }
int64_t StoredRowsB(const StridedGemm& g) { return g.trans_b ? g.n : g.k; }
int64_t StoredColsB(const StridedGemm& g) { return g.trans_b ? g.k : g.n; }

bool Valid(const StridedGemm& g) {
  return g.known_transposes && g.m >= 0 && g.n >= 0 && g.k >= 0 &&
         g.lda >= std::max<int64_t>(1, StoredColsA(g)) &&
         g.ldb >= std::max<int64_t>(1, StoredColsB(g)) &&
         g.ldc >= std::max<int64_t>(1, g.n);
}

void PackRows(const float* src, int64_t ld, int64_t rows, int64_t cols,
              float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * cols, src + r * ld, sizeof(float) * cols);
  }
}

void UnpackRows(const float* src, int64_t rows, int64_t cols, float* dst,
                int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * ld, src + r * cols, sizeof(float) * cols);
  }
}

void ComputeLocally(const StridedGemm& g) {
  auto at_a = [&](int64_t i, int64_t p) {
    return g.trans_a ? g.a[p * g.lda + i] : g.a[i * g.lda + p];
  };
  auto at_b = [&](int64_t p, int64_t j) {
    return g.trans_b ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j];
  };
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      float sum = 0.0f;
      if (g.alpha != 0.0f) {
        for (int64_t p = 0; p < g.k; ++p) sum += at_a(i, p) * at_b(p, j);
      }
      float& c = g.c[i * g.ldc + j];
      c = g.beta == 0.0f ? g.alpha * sum : g.alpha * sum + g.beta * c;
    }
  }
}

}  // namespace gemm::client
