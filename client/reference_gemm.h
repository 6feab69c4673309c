// A float64 reference GEMM and the helpers that check results against it:
// the yardstick for the server's tests, gemm-client --verify and benchmarks.
//
// Thread-safety: stateless functions.
//
//   std::vector<float> a(m * k), b(k * n);
//   FillRandom(a.data(), a.size(), /*seed=*/1);
//   std::vector<double> want = ReferenceGemm(spec, a.data(), b.data(), nullptr);
//   double err = RelativeFrobeniusError(got.data(), want);  // want <= 1e-5
#ifndef GEMM_CLIENT_REFERENCE_GEMM_H_
#define GEMM_CLIENT_REFERENCE_GEMM_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gemm::client {

// C = alpha * op(A) * op(B) + beta * C, row-major; see proto/gemm.proto.
struct GemmSpec {
  uint32_t m = 0;
  uint32_t n = 0;
  uint32_t k = 0;
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;
};

// The result in float64. `c` may be null when beta is 0.
std::vector<double> ReferenceGemm(const GemmSpec& spec, const float* a,
                                  const float* b, const float* c);

// ||got - want||_F / ||want||_F (the absolute error when want is all zero).
// Any NaN or infinity in `got` gives infinity.
double RelativeFrobeniusError(const float* got, const std::vector<double>& want);

// Uniform values in [-1, -1/64] U [1/64, 1]: random and never zero, so an
// unwritten or wrongly indexed output cannot pass by accident.
void FillRandom(float* data, size_t count, uint64_t seed);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_REFERENCE_GEMM_H_
