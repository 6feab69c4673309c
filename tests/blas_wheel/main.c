/* Like python: loads the module with dlopen (RTLD_LOCAL, so its BLAS stays out
   of the global scope) and multiplies 70x50x40; exit 0 when the product is
   within 1e-5 of float64. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  void* module = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!module) { fprintf(stderr, "%s\n", dlerror()); return 2; }
  void (*multiply)(int64_t, int64_t, int64_t, const float*, const float*, float*) =
      dlsym(module, "multiply");
  const int64_t m = 70, n = 50, k = 40;
  float *a = malloc(4 * m * k), *b = malloc(4 * k * n), *c = malloc(4 * m * n);
  for (int64_t i = 0; i < m * k; ++i) a[i] = 0.1f + (i % 7) * 0.1f;
  for (int64_t i = 0; i < k * n; ++i) b[i] = -0.5f + (i % 5) * 0.2f + 0.05f;
  multiply(m, n, k, a, b, c);
  double e2 = 0, r2 = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double w = 0;
      for (int64_t p = 0; p < k; ++p) w += (double)a[i * k + p] * b[p * n + j];
      e2 += (c[i * n + j] - w) * (c[i * n + j] - w); r2 += w * w;
    }
  printf("relative error %.2e\n", sqrt(e2 / r2));
  return sqrt(e2 / r2) <= 1e-5 ? 0 : 1;
}
