// FP32 GEMM kernels for the service: the chapter's six CUDA kernels (v0..v5,
// the teaching road), the project's own past them (v6..v12: warp tiling,
// double buffering, split-K, 3xTF32, cp.async, wgmma) and cuBLAS behind one
// launch contract, found by name in a registry.
//
// Every kernel validates the problem (CanImplement), enqueues it on an
// explicit stream (never the legacy default stream), checks the launch and
// returns a status. Launch does not synchronize: errors raised while the
// kernel runs surface at the caller's next synchronization.
//
// Thread-safety: KernelRegistry::Global() and every SgemmKernel are immutable
// after construction; Launch may be called from several threads at once (on
// different streams). The stream's device must be the calling thread's
// current device.
//
//   const SgemmKernel* kernel = KernelRegistry::Global().Find("v5");
//   SgemmArgs args = MakeSgemmArgs(problem, a, b, c);  // device pointers
//   absl::Status status = kernel->Launch(args, stream);
#ifndef GEMM_KERNELS_SGEMM_H_
#define GEMM_KERNELS_SGEMM_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/gemm_problem.h"
#include "common/precision.h"
#include "kernels/sgemm_args.h"

namespace gemm::kernels {

// One GEMM implementation. Implementations are stateless from the caller's
// point of view (cuBLAS keeps per-thread handles internally).
class SgemmKernel {
 public:
  virtual ~SgemmKernel() = default;
  virtual std::string_view name() const = 0;         // "v5", "cublas", ...
  virtual std::string_view description() const = 0;  // one line
  // The arithmetic it computes in (common/precision.h).
  virtual Precision precision() const { return Precision::kFp32; }
  // Whether CUDA device `device` can run it at all (v12's wgmma needs
  // compute capability 9.0); Launch on another is UNIMPLEMENTED.
  virtual bool RunsOnDevice(int device) const { return true; }
  // OK when Launch can run `args`; INVALID_ARGUMENT (or UNIMPLEMENTED for a
  // shape outside this kernel's limits) otherwise. Launches nothing.
  virtual absl::Status CanImplement(const SgemmArgs& args) const = 0;
  // Enqueues the GEMM on `stream` (must not be null). Thread-safe.
  virtual absl::Status Launch(const SgemmArgs& args,
                              cudaStream_t stream) const = 0;
};

// Name -> kernel. Global() holds the built-in kernels; tests may build their
// own registries.
class KernelRegistry {
 public:
  KernelRegistry() = default;
  KernelRegistry(const KernelRegistry&) = delete;
  KernelRegistry& operator=(const KernelRegistry&) = delete;

  static const KernelRegistry&
  Global();  // all built-in kernels, registered once

  // Adds `kernel`; ALREADY_EXISTS when its name is taken.
  absl::Status Register(std::unique_ptr<SgemmKernel> kernel);

  const SgemmKernel* Find(std::string_view name) const;  // nullptr when unknown
  std::vector<std::string> Names()
      const;  // in registration order: v0..v12, then cublas

 private:
  std::vector<std::unique_ptr<SgemmKernel>> kernels_;
};

// The launch arguments of one `problem` on packed device operands: the one
// place where a GemmProblem becomes SgemmArgs. A batch sets batch_count and
// the strides afterwards.
SgemmArgs MakeSgemmArgs(const GemmProblem& problem, const float* a,
                        const float* b, float* c);

// OK, or INTERNAL "what: <cudaGetErrorString(err)>".
absl::Status CudaStatus(cudaError_t err, std::string_view what);

// The checks every kernel shares: sizes >= 0, batch_count >= 1, non-null
// pointers where they are read or written, leading dimensions that cover a
// row, batch strides >= 0 with non-overlapping C members. INVALID_ARGUMENT
// with the reason otherwise.
absl::Status ValidateSgemmArgs(const SgemmArgs& args);

// Rejects nullptr and cudaStreamLegacy: the contract is an explicit stream.
absl::Status ValidateStream(cudaStream_t stream);

}  // namespace gemm::kernels

#endif  // GEMM_KERNELS_SGEMM_H_
