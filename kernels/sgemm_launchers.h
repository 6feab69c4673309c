// The CUDA side of the kernels: one plain launcher per kernel file, compiled
// by nvcc, with no abseil in sight. sgemm_kernels.cc wraps these into
// SgemmKernel objects; nothing else should call them.
//
// Contract of every launcher: `args` already passed ValidateSgemmArgs and the
// kernel's CanImplement, `stream` is an explicit stream. The launcher splits
// batches larger than the grid's z limit into several launches, launches, and
// returns cudaGetLastError() (cudaSuccess when m or n is 0: nothing to do).
//
// Thread-safety: stateless; safe from any thread.
//
//   cudaError_t err = LaunchSgemmVectorized(args, stream);
#ifndef GEMM_KERNELS_SGEMM_LAUNCHERS_H_
#define GEMM_KERNELS_SGEMM_LAUNCHERS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/sgemm_args.h"

namespace gemm::kernels {

// The largest m or n any tiled kernel takes: the grid's y dimension (at most
// 65535 blocks) covers m or n in tiles of at least 32.
inline constexpr int kMaxTiledDim = 65535 * 32;

cudaError_t LaunchSgemmNaive(const SgemmArgs& args, cudaStream_t stream);  // v0
cudaError_t LaunchSgemmCoalesced(const SgemmArgs& args,
                                 cudaStream_t stream);  // v1
cudaError_t LaunchSgemmSmemTiling(const SgemmArgs& args,
                                  cudaStream_t stream);  // v2
cudaError_t LaunchSgemm1dRegisterTiling(const SgemmArgs& args,
                                        cudaStream_t stream);  // v3
cudaError_t LaunchSgemm2dRegisterTiling(const SgemmArgs& args,
                                        cudaStream_t stream);  // v4
cudaError_t LaunchSgemmVectorized(const SgemmArgs& args,
                                  cudaStream_t stream);  // v5
cudaError_t LaunchSgemmWarpTiling(const SgemmArgs& args,
                                  cudaStream_t stream);  // v6
cudaError_t LaunchSgemmDoubleBuffering(const SgemmArgs& args,
                                       cudaStream_t stream);  // v7
cudaError_t LaunchSgemmDoubleBufferingSmallTiles(
    const SgemmArgs& args, cudaStream_t stream);  // v7-64x64
cudaError_t LaunchSgemmSplitK(const SgemmArgs& args,
                              cudaStream_t stream);  // v8
cudaError_t LaunchSgemm3xTf32(const SgemmArgs& args,
                              cudaStream_t stream);  // v9, 3xTF32
cudaError_t LaunchSgemmCpAsync(const SgemmArgs& args,
                               cudaStream_t stream);  // v10
cudaError_t LaunchSgemmCpAsyncSmallTiles(const SgemmArgs& args,
                                         cudaStream_t stream);  // v10-64x64
cudaError_t LaunchSgemmCpAsyncPacked(const SgemmArgs& args,
                                     cudaStream_t stream);  // v10-packed
cudaError_t LaunchSgemmPipelinedSplitK(const SgemmArgs& args,
                                       cudaStream_t stream);  // v11
cudaError_t LaunchSgemmWgmma3xTf32(const SgemmArgs& args,
                                   cudaStream_t stream);  // v12, 3xTF32

// True when `device` runs v12's wgmma code: compute capability 9.0 (v12 is
// built for sm_90a only). Elsewhere its launcher returns
// cudaErrorNotSupported.
bool SgemmWgmmaSupported(int device);

// The stream-ordered memory pool that v11 and v12 take their workspaces from
// on `device` (cudaMallocFromPoolAsync), made at its first use. It keeps up to
// 1 GiB reserved between launches: the device's default pool would hand its
// memory back at every synchronization, and mapping it again takes longer
// than a skinny product (and 7% of a 4096^3 one for v12). It is outside the
// server's device-memory budget; running out is RESOURCE_EXHAUSTED.
// Thread-safe.
cudaError_t SgemmWorkspacePool(int device, cudaMemPool_t* pool);

// Hands `workspace` (null: nothing to hand back) to its pool in stream order
// after the launches before it; returns `launched`, or the release's error
// where the launch succeeded.
inline cudaError_t SgemmWorkspaceRelease(void* workspace, cudaError_t launched,
                                         cudaStream_t stream) {
  if (workspace == nullptr) return launched;
  const cudaError_t freed = cudaFreeAsync(workspace, stream);
  return launched != cudaSuccess ? launched : freed;
}

// True when v5 (and v6, v7) can use 16-byte global accesses for `args`: every
// base pointer 16-byte aligned, every leading dimension and batch stride a
// multiple of 4. Otherwise v5 runs its scalar-access instantiation (same
// tiling, same math).
bool SgemmVectorAccessAllowed(const SgemmArgs& args);

// Float64 reference for checking: ref[i * n + j] (per batch member, dense,
// stride m * n) = alpha * sum_k op(A)(i, k) * op(B)(k, j) + beta * C(i, j),
// accumulated in double. Reads C only when beta != 0. Slow; for tests and the
// benchmark's correctness check.
cudaError_t LaunchReferenceGemmF64(const SgemmArgs& args, double* ref,
                                   cudaStream_t stream);

// Adds sum((c - ref)^2) to sums[0] and sum(ref^2) to sums[1] (in double) over
// every batch member's m x n C; sums must be zeroed by the caller. With
// relative Frobenius error = sqrt(sums[0] / sums[1]). NaN in C propagates.
cudaError_t LaunchErrorSums(const SgemmArgs& args, const double* ref,
                            double* sums, cudaStream_t stream);

// Fills x[0..count) with uniform values in [-1, -0.1] U [0.1, 1] (never zero)
// from a counter-based hash of (seed, index): the same seed gives the same
// data. For benchmarks and tests; fast at any size.
cudaError_t LaunchFillRandom(float* x, int64_t count, uint64_t seed,
                             cudaStream_t stream);

}  // namespace gemm::kernels

#endif  // GEMM_KERNELS_SGEMM_LAUNCHERS_H_
