// A float64 reference GEMM and the helpers that check results against it:
// the yardstick for the server's tests, gemm-client --verify and benchmarks.
//
// Thread-safety: stateless functions.
//
//   std::vector<float> a(m * k), b(k * n);
//   FillRandom(a.data(), a.size(), /*seed=*/1);
//   std::vector<double> want = ReferenceGemm(problem, a.data(), b.data(),
//   nullptr); double err = RelativeFrobeniusError(got.data(), want);  // want
//   <= 1e-5
#ifndef GEMM_COMMON_REFERENCE_GEMM_H_
#define GEMM_COMMON_REFERENCE_GEMM_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/gemm_problem.h"

namespace gemm {

// The result in float64. `c` may be null when beta is 0.
std::vector<double> ReferenceGemm(const GemmProblem& problem, const float* a,
                                  const float* b, const float* c);

// ||got - want||_F / ||want||_F (the absolute error when want is all zero).
// Any NaN or infinity in `got` gives infinity.
double RelativeFrobeniusError(const float* got,
                              const std::vector<double>& want);

// Uniform values in [-1, -1/64] U [1/64, 1]: random and never zero, so an
// unwritten or wrongly indexed output cannot pass by accident.
void FillRandom(float* data, size_t count, uint64_t seed);

}  // namespace gemm

#endif  // GEMM_COMMON_REFERENCE_GEMM_H_
