/* A BLAS as numpy's wheels ship it: 64-bit integers, symbols prefixed scipy_
   (scipy-openblas64). Row-major without transposes: all main.c asks. */
#include <stdint.h>
void scipy_cblas_sgemm64_(int order, int ta, int tb, int64_t m, int64_t n, int64_t k,
                          float alpha, const float* a, int64_t lda, const float* b,
                          int64_t ldb, float beta, float* c, int64_t ldc) {
  (void)order; (void)ta; (void)tb;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float s = 0;
      for (int64_t p = 0; p < k; ++p) s += a[i * lda + p] * b[p * ldb + j];
      c[i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * c[i * ldc + j]);
    }
}
