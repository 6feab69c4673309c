#include "kernels/v10_tile_sweep.h"

#include "kernels/sgemm_kernels.h"
#include "kernels/sgemm_v10_tiles.h"

namespace gemm::kernels {

std::vector<std::unique_ptr<SgemmKernel>> MakeV10TileSweepKernels() {
  std::vector<std::unique_ptr<SgemmKernel>> kernels;
  for (int i = 0; i < kV10TileSweepSize; ++i) {
    kernels.push_back(MakeLauncherKernel(
        kV10TileSweep[i].name,
        "v10's kernel with this tile configuration (gemm-bench --tile-sweep)",
        kV10TileSweep[i].launch));
  }
  return kernels;
}

}  // namespace gemm::kernels
