// The launchers of sgemm_v10_tiles.cu, plain C++ for nvcc and the host
// alike: v10's kernel in other tile configurations, for gemm-bench
// --tile-sweep (v10_tile_sweep.h wraps them as SgemmKernels). Not part of
// //kernels:sgemm, so never linked into the server.
//
// Thread-safety: stateless launchers; safe from any thread.
//
//   for (int i = 0; i < kV10TileSweepSize; ++i)
//     kV10TileSweep[i].launch(args, stream);
#ifndef GEMM_KERNELS_SGEMM_V10_TILES_H_
#define GEMM_KERNELS_SGEMM_V10_TILES_H_

#include <cuda_runtime_api.h>

#include "kernels/sgemm_args.h"

namespace gemm::kernels {

// One launcher per tile configuration of v10's kernel (sgemm_launchers.h's
// contract).
struct TileSweepLauncher {
  const char* name;  // "v10t-BMxBNxBK-wWMxWN-sSTAGES-bBLOCKS"
  cudaError_t (*launch)(const SgemmArgs& args, cudaStream_t stream);
};
extern const TileSweepLauncher kV10TileSweep[];
extern const int kV10TileSweepSize;

}  // namespace gemm::kernels

#endif  // GEMM_KERNELS_SGEMM_V10_TILES_H_
