// GemmProblem: one single-precision GEMM, the one description of a problem
// that the client, the server, the kernels and the benchmarks share.
//
// C = alpha * op(A) * op(B) + beta * C in IEEE float32, row-major: op(A) is
// m x k, op(B) is k x n, C is m x n. A is stored k x m when trans_a is set,
// B n x k when trans_b is; every matrix is packed (its row stride is its
// width). proto/gemm.proto's GemmParams carries the same fields on the wire.
//
// Thread-safety: a plain value type.
//
//   GemmProblem p{.m = 1000, .n = 999, .k = 777};
//   std::vector<float> a(p.a_elements()), b(p.b_elements());
//   printf("%s: %.1f GFLOP\n", p.ToString().c_str(), p.flops() / 1e9);
#ifndef GEMM_COMMON_GEMM_PROBLEM_H_
#define GEMM_COMMON_GEMM_PROBLEM_H_

#include <algorithm>
#include <cstdint>
#include <string>

namespace gemm {

struct GemmProblem {
  uint32_t m = 0;
  uint32_t n = 0;
  uint32_t k = 0;
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;

  uint64_t a_elements() const { return uint64_t{m} * k; }
  uint64_t b_elements() const { return uint64_t{k} * n; }
  uint64_t c_elements() const { return uint64_t{m} * n; }
  // Bytes of A, B and C together; UINT64_MAX when that does not fit in 64
  // bits (any dimension may be near 2^32), so that a size limit refuses it
  // instead of seeing the wrapped-around remainder.
  uint64_t total_bytes() const {
    uint64_t elements = 0, bytes = 0;
    if (__builtin_add_overflow(a_elements(), b_elements(), &elements) ||
        __builtin_add_overflow(elements, c_elements(), &elements) ||
        __builtin_mul_overflow(elements, uint64_t{4}, &bytes)) {
      return UINT64_MAX;
    }
    return bytes;
  }
  // Row strides of the stored (packed) matrices, at least 1.
  uint32_t lda() const { return std::max<uint32_t>(1, trans_a ? m : k); }
  uint32_t ldb() const { return std::max<uint32_t>(1, trans_b ? k : n); }
  uint32_t ldc() const { return std::max<uint32_t>(1, n); }
  double flops() const { return 2.0 * m * n * k; }

  // "MxNxK", with " A^T" and " B^T" for transposed operands.
  std::string ToString() const;
  // Same sizes and transposes (alpha and beta aside).
  bool SameShapeAs(const GemmProblem& other) const {
    return m == other.m && n == other.n && k == other.k &&
           trans_a == other.trans_a && trans_b == other.trans_b;
  }
};

}  // namespace gemm

#endif  // GEMM_COMMON_GEMM_PROBLEM_H_
