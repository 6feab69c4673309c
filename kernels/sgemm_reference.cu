// A float64 reference GEMM and an error reduction on the GPU, for checking
// the kernels at sizes where a CPU reference is too slow (8192^3 is 5.5e11
// multiply-adds). Not part of the registry: it is a yardstick, not a kernel.
#include "kernels/sgemm_common.cuh"
#include "kernels/sgemm_launchers.h"

namespace gemm::kernels {
namespace {

using detail::BatchMember;
using detail::CeilDiv;

constexpr int kBlockDim = 16;

// One thread per output, threadIdx.x on columns, accumulating in double.
template <bool kTransA,  // A is stored transposed (k x m)
          bool kTransB>  // B is stored transposed (n x k)
__global__ void ReferenceGemmF64Kernel(SgemmArgs args, double* ref) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= args.m || col >= args.n) return;
  const BatchMember p = detail::SelectBatchMember(args);
  double acc = 0.0;
  for (int k = 0; k < args.k; ++k) {
    acc += static_cast<double>(
               detail::LoadOperand<kTransA>(p.a, args.lda, row, k)) *
           static_cast<double>(
               detail::LoadOperand<kTransB>(p.b, args.ldb, k, col));
  }
  double out = static_cast<double>(args.alpha) * acc;
  if (args.beta != 0.f) {
    out += static_cast<double>(args.beta) *
           p.c[static_cast<int64_t>(row) * args.ldc + col];
  }
  ref[(static_cast<int64_t>(blockIdx.z) * args.m + row) * args.n + col] = out;
}

__device__ __forceinline__ double WarpSum(double v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void ErrorSumsKernel(SgemmArgs args, const double* ref,
                                double* sums) {
  const int64_t per_member = static_cast<int64_t>(args.m) * args.n;
  const int64_t total = per_member * args.batch_count;
  double diff2 = 0.0, ref2 = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t z = i / per_member, rem = i % per_member;
    const int row = static_cast<int>(rem / args.n),
              col = static_cast<int>(rem % args.n);
    const double c =
        args.c[z * args.stride_c + static_cast<int64_t>(row) * args.ldc + col];
    const double d = c - ref[i];
    diff2 += d * d;
    ref2 += ref[i] * ref[i];
  }
  diff2 = WarpSum(diff2);
  ref2 = WarpSum(ref2);
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&sums[0], diff2);
    atomicAdd(&sums[1], ref2);
  }
}

// splitmix64: a good 64-bit mix, so neighbouring indices are unrelated.
__device__ __forceinline__ uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void FillRandomKernel(float* x, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < count; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t bits = Mix(seed ^ Mix(static_cast<uint64_t>(i)));
    const float magnitude =
        0.1f + 0.9f * static_cast<float>(bits >> 40) * (1.f / 16777216.f);
    x[i] = (bits & 1) ? -magnitude : magnitude;
  }
}

}  // namespace

cudaError_t LaunchFillRandom(float* x, int64_t count, uint64_t seed,
                             cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  constexpr int kThreads = 256, kMaxBlocks = 8192;
  const int blocks = static_cast<int>(
      std::min<int64_t>(kMaxBlocks, (count + kThreads - 1) / kThreads));
  FillRandomKernel<<<blocks, kThreads, 0, stream>>>(x, count, seed);
  return cudaGetLastError();
}

cudaError_t LaunchReferenceGemmF64(const SgemmArgs& args, double* ref,
                                   cudaStream_t stream) {
  int first = 0;
  return detail::ForEachBatchChunk(args, [&](const SgemmArgs& chunk) {
    const dim3 block(kBlockDim, kBlockDim);
    const dim3 grid(CeilDiv(chunk.n, kBlockDim), CeilDiv(chunk.m, kBlockDim),
                    chunk.batch_count);
    double* chunk_ref = ref + static_cast<int64_t>(first) * chunk.m * chunk.n;
    first += chunk.batch_count;
    detail::DispatchTransposes(chunk, [&](auto trans_a, auto trans_b) {
      ReferenceGemmF64Kernel<decltype(trans_a)::value, decltype(trans_b)::value>
          <<<grid, block, 0, stream>>>(chunk, chunk_ref);
    });
  });
}

cudaError_t LaunchErrorSums(const SgemmArgs& args, const double* ref,
                            double* sums, cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return cudaSuccess;
  constexpr int kThreads = 256, kMaxBlocks = 4096;
  const int64_t total =
      static_cast<int64_t>(args.m) * args.n * args.batch_count;
  const int blocks = static_cast<int>(
      std::min<int64_t>(kMaxBlocks, (total + kThreads - 1) / kThreads));
  ErrorSumsKernel<<<blocks, kThreads, 0, stream>>>(args, ref, sums);
  return cudaGetLastError();
}

}  // namespace gemm::kernels
