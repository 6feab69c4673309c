// v10's tile configurations (sgemm_v10_tiles.cu) as SgemmKernels named
// "v10t-BMxBNxBK-wWMxWN-sSTAGES-bBLOCKS", for gemm-bench --tile-sweep
// alone: never registered in KernelRegistry::Global(), and in a library of
// their own that the server does not link.
//
// Thread-safety: the returned kernels are immutable; Launch is thread-safe.
//
//   for (const auto& kernel : MakeV10TileSweepKernels())
//     kernel->Launch(args, stream);
#ifndef GEMM_KERNELS_V10_TILE_SWEEP_H_
#define GEMM_KERNELS_V10_TILE_SWEEP_H_

#include <memory>
#include <vector>

#include "kernels/sgemm.h"

namespace gemm::kernels {

// v10's own configuration first, then the others.
std::vector<std::unique_ptr<SgemmKernel>> MakeV10TileSweepKernels();

}  // namespace gemm::kernels

#endif  // GEMM_KERNELS_V10_TILE_SWEEP_H_
