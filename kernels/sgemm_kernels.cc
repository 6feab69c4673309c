#include "kernels/sgemm_kernels.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/sgemm_launchers.h"

namespace gemm::kernels {
namespace {

// One of the chapter's kernels: the shared validation, a grid-size limit and
// a launcher from a kernel file.
class ChapterSgemmKernel final : public SgemmKernel {
 public:
  ChapterSgemmKernel(std::string name, std::string description,
                     Launcher launcher, Precision precision, bool needs_wgmma)
      : name_(std::move(name)),
        description_(std::move(description)),
        launcher_(launcher),
        precision_(precision),
        needs_wgmma_(needs_wgmma) {}

  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }
  Precision precision() const override { return precision_; }
  bool RunsOnDevice(int device) const override {
    return !needs_wgmma_ || SgemmWgmmaSupported(device);
  }

  absl::Status CanImplement(const SgemmArgs& args) const override {
    if (absl::Status status = ValidateSgemmArgs(args); !status.ok())
      return status;
    if (args.m > kMaxTiledDim || args.n > kMaxTiledDim) {
      return absl::UnimplementedError(
          absl::StrCat(name_, ": m and n must be <= ", kMaxTiledDim,
                       " (grid limit), got m=", args.m, " n=", args.n));
    }
    return absl::OkStatus();
  }

  absl::Status Launch(const SgemmArgs& args,
                      cudaStream_t stream) const override {
    if (absl::Status status = CanImplement(args); !status.ok()) return status;
    if (absl::Status status = ValidateStream(stream); !status.ok())
      return status;
    // A property of the device, not of the problem: checked here rather
    // than in CanImplement, which holds without a GPU.
    if (needs_wgmma_) {
      int device = 0;
      if (cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) {
        cudaGetLastError();
        return CudaStatus(err, "cudaGetDevice");
      }
      if (!RunsOnDevice(device)) {
        return absl::UnimplementedError(absl::StrCat(
            name_,
            ": needs a compute capability 9.0 GPU (Hopper's wgmma); "
            "CUDA device ",
            device, " is not one"));
      }
    }
    const cudaError_t err = launcher_(args, stream);
    if (err == cudaSuccess) return absl::OkStatus();
    // Leave no error behind for the next caller's cudaGetLastError (a
    // sticky one stays regardless).
    cudaGetLastError();
    if (err == cudaErrorMemoryAllocation) {
      // v11's and v12's workspaces come from a pool outside the server's
      // device-memory budget.
      return absl::ResourceExhaustedError(absl::StrCat(
          "sgemm ", name_, ": no device memory for its workspace (",
          cudaGetErrorString(err), ")"));
    }
    return CudaStatus(err, absl::StrCat("sgemm ", name_, " launch"));
  }

 private:
  const std::string name_;
  const std::string description_;
  const Launcher launcher_;
  const Precision precision_;
  const bool needs_wgmma_;
};

struct ChapterKernelEntry {
  const char* name;
  const char* description;
  Launcher launcher;
  Precision precision = Precision::kFp32;
  bool needs_wgmma = false;  // runs only on compute capability 9.0
};

// Teaching order; each entry is one kernel file.
constexpr ChapterKernelEntry kChapterKernels[] = {
    {"v0", "naive: one thread per C element, threadIdx.x on rows (uncoalesced)",
     LaunchSgemmNaive},
    {"v1", "coalesced: one thread per C element, threadIdx.x on columns",
     LaunchSgemmCoalesced},
    {"v2", "shared-memory tiling: 32x32 block tile", LaunchSgemmSmemTiling},
    {"v3", "1-D register tiling: 64x64 block tile, BK 8, 8x1 thread tile",
     LaunchSgemm1dRegisterTiling},
    {"v4", "2-D register tiling: 128x128 block tile, BK 8, 8x8 thread tile",
     LaunchSgemm2dRegisterTiling},
    {"v5",
     "vectorized: v4 tiling, A transposed in shared memory, float4 global "
     "access",
     LaunchSgemmVectorized},
    {"v6",
     "warp tiling: v5 with 64x32 warp tiles of 2x2 sub-tiles, 4x4 per "
     "thread (conflict-free shared-memory reads)",
     LaunchSgemmWarpTiling},
    {"v7",
     "double buffering: v6 with two shared-memory stages, the next K slice "
     "loaded while this one is multiplied",
     LaunchSgemmDoubleBuffering},
    {"v7-64x64",
     "v7 with 64x64 block tiles of 4 warps of 32x32: more blocks for "
     "mid-sized shapes (a tile configuration auto may pick)",
     LaunchSgemmDoubleBufferingSmallTiles},
    {"v8",
     "split-K: v7-64x64 with K cut into ranges computed by blocks of their "
     "own and added into C, for problems with too few tiles to fill the GPU",
     LaunchSgemmSplitK},
    {"v9",
     "3xTF32: v6's tiles multiplied on Tensor Cores (mma.sync m16n8k8), each "
     "operand split into a TF32 part and a TF32 residual, three products "
     "accumulated in float32: float32-accurate",
     LaunchSgemm3xTf32, Precision::kFp32Tensor},
    {"v10",
     "cp.async pipeline: v6's tiles fed straight into shared memory by "
     "cp.async, 3 stages of K slices of 16, padded rows (conflict-free "
     "transposing stores)",
     LaunchSgemmCpAsync},
    {"v10-64x64",
     "v10 with 64x64 block tiles of 4 warps of 32x32, 4 stages: more blocks "
     "for mid-sized shapes",
     LaunchSgemmCpAsyncSmallTiles},
    {"v10-packed",
     "v10 with K slices of 32 and 2 stages; an operand stored along K is "
     "first transposed into a workspace, so that every copy is 16 bytes: "
     "for large products",
     LaunchSgemmCpAsyncPacked},
    {"v11",
     "split-K on v10's pipeline, the block tile chosen by shape (128x16 for "
     "N <= 16, else 64x64): for skinny and deep-K problems",
     LaunchSgemmPipelinedSplitK},
    {"v12",
     "3xTF32 on wgmma (Hopper only): both operands split once into TF32 "
     "parts in a K-major workspace, 128x128 tiles of two warpgroups reading "
     "them from 3 cp.async stages in wgmma's swizzled layout; "
     "float32-accurate",
     LaunchSgemmWgmma3xTf32, Precision::kFp32Tensor, /*needs_wgmma=*/true},
};

}  // namespace

std::vector<std::unique_ptr<SgemmKernel>> MakeChapterKernels() {
  std::vector<std::unique_ptr<SgemmKernel>> kernels;
  for (const ChapterKernelEntry& entry : kChapterKernels) {
    kernels.push_back(std::make_unique<ChapterSgemmKernel>(
        entry.name, entry.description, entry.launcher, entry.precision,
        entry.needs_wgmma));
  }
  return kernels;
}

std::unique_ptr<SgemmKernel> MakeLauncherKernel(std::string name,
                                                std::string description,
                                                Launcher launcher,
                                                Precision precision) {
  return std::make_unique<ChapterSgemmKernel>(
      std::move(name), std::move(description), launcher, precision, false);
}

}  // namespace gemm::kernels
