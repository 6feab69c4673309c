// cuBLAS as one more SgemmKernel ("cublas"): the yardstick the chapter's
// kernels are measured against, and a production path for the server; and
// its Tensor Core compute types as "cublas-tf32" and "cublas-bf16", for
// callers that opt in to rounded inputs (GemmParams.precision).
//
// Row-major problems go through the transpose identity: row-major C (m x n)
// is column-major C^T, and C^T = op(B)^T op(A)^T, so cuBLAS gets B first.
// Pure FP32 (CUBLAS_DEFAULT_MATH: no TF32); batches use
// cublasSgemmStridedBatched. libcublas.so.13 is opened with dlopen at the
// first Launch, so binaries start without cuBLAS and a missing library is a
// FAILED_PRECONDITION status naming what was tried.
//
// Thread-safety: Launch is thread-safe. Each thread keeps one cuBLAS handle
// per device (the calling thread's current device), destroyed at thread exit.
//
//   auto kernel = MakeCublasSgemmKernel();
//   absl::Status status = kernel->Launch(args, stream);
#ifndef GEMM_KERNELS_CUBLAS_SGEMM_H_
#define GEMM_KERNELS_CUBLAS_SGEMM_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/sgemm.h"

namespace gemm::kernels {

std::unique_ptr<SgemmKernel> MakeCublasSgemmKernel();

// "cublas-tf32" and "cublas-bf16": cuBLAS's Tensor Core compute types on
// float32 operands (common/precision.h), through cublasGemmEx.
std::vector<std::unique_ptr<SgemmKernel>> MakeCublasTensorCoreKernels();

// "major.minor.patch" of the cuBLAS that Launch uses, loading it if needed.
absl::StatusOr<std::string> CublasVersion();

}  // namespace gemm::kernels

#endif  // GEMM_KERNELS_CUBLAS_SGEMM_H_
