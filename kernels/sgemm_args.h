// The problem description shared by the host API (sgemm.h) and the CUDA
// launchers (sgemm_launchers.h). Plain C++17 with no CUDA or abseil headers,
// so that nvcc-compiled files can include it.
//
// Thread-safety: a plain value type.
//
//   SgemmArgs args;
//   args.m = 1000; args.n = 999; args.k = 777;
//   args.a = a; args.lda = 777; args.b = b; args.ldb = 999; args.c = c;
//   args.ldc = 999;
#ifndef GEMM_KERNELS_SGEMM_ARGS_H_
#define GEMM_KERNELS_SGEMM_ARGS_H_

#include <cstdint>

namespace gemm::kernels {

// One row-major FP32 GEMM, or a batch of same-shape ones, on device pointers:
// C = alpha * op(A) * op(B) + beta * C. op(A) is m x k, op(B) k x n, C m x n.
//
// Storage: A is stored m x k when !trans_a and k x m when trans_a, both
// row-major with row stride lda (so lda >= k, or >= m when transposed); B
// likewise k x n or n x k with ldb; C is m x n with ldc >= n. Batch member i
// uses a + i * stride_a, b + i * stride_b and c + i * stride_c. When
// beta == 0, C is only written, never read (it may hold NaN).
struct SgemmArgs {
  int m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.f, beta = 0.f;
  const float* a = nullptr;
  int64_t lda =
      0;  // leading dims in elements (row stride of the stored matrix)
  const float* b = nullptr;
  int64_t ldb = 0;
  float* c = nullptr;
  int64_t ldc = 0;
  int batch_count = 1;  // >= 1
  int64_t stride_a = 0, stride_b = 0,
          stride_c = 0;  // elements between batch members
};

}  // namespace gemm::kernels

#endif  // GEMM_KERNELS_SGEMM_ARGS_H_
