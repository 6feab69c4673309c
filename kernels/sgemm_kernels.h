// The project's own kernels (the chapter's v0..v5, then v6, v7, v7-64x64
// and v8) as SgemmKernel objects, in teaching order. KernelRegistry::Global()
// registers them; use the registry rather than this header.
//
// Thread-safety: the returned kernels are immutable; Launch is thread-safe.
//
//   for (auto& kernel : MakeChapterKernels())
//   registry.Register(std::move(kernel));
#ifndef GEMM_KERNELS_SGEMM_KERNELS_H_
#define GEMM_KERNELS_SGEMM_KERNELS_H_

#include <memory>
#include <string>
#include <vector>

#include "kernels/sgemm.h"

namespace gemm::kernels {

std::vector<std::unique_ptr<SgemmKernel>> MakeChapterKernels();

// A plain launcher (sgemm_launchers.h's contract) as an SgemmKernel with the
// chapter kernels' validation: for kernels outside the served registry
// (v10_tile_sweep.h).
using Launcher = cudaError_t (*)(const SgemmArgs&, cudaStream_t);
std::unique_ptr<SgemmKernel> MakeLauncherKernel(
    std::string name, std::string description, Launcher launcher,
    Precision precision = Precision::kFp32);

}  // namespace gemm::kernels

#endif  // GEMM_KERNELS_SGEMM_KERNELS_H_
