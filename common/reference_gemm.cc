#include "common/reference_gemm.h"

#include <cmath>
#include <limits>
#include <random>

namespace gemm {

std::vector<double> ReferenceGemm(const GemmProblem& s, const float* a,
                                  const float* b, const float* c) {
  const size_t m = s.m, n = s.n, k = s.k;
  std::vector<double> acc(m * n, 0.0);
  // i-p-j order: the inner loop walks rows of B and C contiguously.
  std::vector<double> b_row(n);
  for (size_t p = 0; p < k; ++p) {
    for (size_t j = 0; j < n; ++j) {
      b_row[j] = s.trans_b ? b[j * k + p] : b[p * n + j];
    }
    for (size_t i = 0; i < m; ++i) {
      const double a_ip = s.trans_a ? a[p * m + i] : a[i * k + p];
      double* row = &acc[i * n];
      for (size_t j = 0; j < n; ++j) row[j] += a_ip * b_row[j];
    }
  }
  for (size_t i = 0; i < m * n; ++i) {
    acc[i] *= s.alpha;
    if (s.beta != 0.0f) acc[i] += static_cast<double>(s.beta) * c[i];
  }
  return acc;
}

double RelativeFrobeniusError(const float* got,
                              const std::vector<double>& want) {
  double diff = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    const double d = static_cast<double>(got[i]) - want[i];
    diff += d * d;
    norm += want[i] * want[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

void FillRandom(float* data, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> magnitude(1.0f / 64, 1.0f);
  for (size_t i = 0; i < count; ++i) {
    const float v = magnitude(rng);
    data[i] = (rng() & 1) ? v : -v;
  }
}

}  // namespace gemm
