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
#include <vector>

#include "kernels/sgemm.h"

namespace gemm::kernels {

std::vector<std::unique_ptr<SgemmKernel>> MakeChapterKernels();

// v10's tile configurations (sgemm_v10_tiles.cu), for gemm-bench
// --tile-sweep alone: never registered in KernelRegistry::Global(), so
// never served.
std::vector<std::unique_ptr<SgemmKernel>> MakeV10TileSweepKernels();

}  // namespace gemm::kernels

#endif  // GEMM_KERNELS_SGEMM_KERNELS_H_
