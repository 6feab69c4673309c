// BLAS's SGEMM in the service's terms. BLAS calls come column-major
// (sgemm_, cblas_sgemm with CblasColMajor) or row-major (CblasRowMajor),
// with leading dimensions that may exceed the matrix; the service takes
// dense row-major operands (common/gemm_problem.h). A column-major
// C = alpha op(A) op(B) + beta C is the row-major C^T = alpha op(B)^T
// op(A)^T + beta C^T over the very same memory (a column-major matrix read
// row by row is its transpose), so a column-major call becomes a row-major
// one with A and B swapped, m and n swapped, and the transposes kept with
// their operands. Operands with gaps between rows are packed densely before
// sending, and the result unpacked into C's rows.
//
// Thread-safety: stateless functions and plain values.
//
//   StridedGemm g = FromColumnMajor('N', 'T', m, n, k, alpha, a, lda, ...);
//   if (Valid(g)) { PackRows(g.a, g.lda, StoredRows(g, 'a'), ...); }
#ifndef GEMM_CLIENT_BLAS_BLAS_LAYOUT_H_
#define GEMM_CLIENT_BLAS_BLAS_LAYOUT_H_

#include <cstdint>

namespace gemm::client {

// A row-major GEMM over strided memory: C (m x n, row stride ldc) =
// alpha op(A) op(B) + beta C, with A stored k x m when trans_a (else m x k)
// and B stored n x k when trans_b (else k x n), each row `ld` floats apart.
struct StridedGemm {
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float* c = nullptr;
  int64_t ldc = 0;
  // False when a transpose argument was not one BLAS knows (N, T or C, any
  // case; C, conjugate transpose, is T for real matrices).
  bool known_transposes = true;
};

// A column-major BLAS call (sgemm_, or cblas_sgemm with CblasColMajor) as
// the row-major GEMM over the same memory.
StridedGemm FromColumnMajor(char transa, char transb, int64_t m, int64_t n,
                            int64_t k, float alpha, const float* a, int64_t lda,
                            const float* b, int64_t ldb, float beta, float* c,
                            int64_t ldc);
// A row-major call (cblas_sgemm with CblasRowMajor).
StridedGemm FromRowMajor(bool trans_a, bool trans_b, int64_t m, int64_t n,
                         int64_t k, float alpha, const float* a, int64_t lda,
                         const float* b, int64_t ldb, float beta, float* c,
                         int64_t ldc);

// Rows and columns of A and B as stored.
int64_t StoredRowsA(const StridedGemm& g);
int64_t StoredColsA(const StridedGemm& g);
int64_t StoredRowsB(const StridedGemm& g);
int64_t StoredColsB(const StridedGemm& g);

// BLAS's argument rules: known transposes, no negative dimension, and
// every leading dimension at least max(1, the stored row length). A call
// that breaks one is BLAS's to report (its XERBLA), not the service's.
bool Valid(const StridedGemm& g);

// Copies `rows` rows of `cols` floats, `ld` apart at src, densely to dst.
void PackRows(const float* src, int64_t ld, int64_t rows, int64_t cols,
              float* dst);
// Copies a dense rows x cols src into rows `ld` apart at dst.
void UnpackRows(const float* src, int64_t rows, int64_t cols, float* dst,
                int64_t ld);

// The GEMM computed here, in float with the loops of the reference BLAS:
// for a library with no other BLAS to hand calls to. C is not read when
// beta is 0.
void ComputeLocally(const StridedGemm& g);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_BLAS_BLAS_LAYOUT_H_
