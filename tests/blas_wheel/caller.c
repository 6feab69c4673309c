/* Like numpy's extension module: calls the BLAS it was linked with. */
#include <stdint.h>
void scipy_cblas_sgemm64_(int, int, int, int64_t, int64_t, int64_t, float, const float*,
                          int64_t, const float*, int64_t, float, float*, int64_t);
void multiply(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  scipy_cblas_sgemm64_(101, 111, 111, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}
