// v11, split-K on v10's pipeline, with the block tile chosen by shape. v8
// showed that cutting K into ranges fills the GPU for skinny problems, but
// its 64 x 64 tiles, staged through registers, waste most of each tile when
// N is tiny: 4096 x 16 x 4096 multiplies 64 columns to keep 16. v11 runs
// v10's cp.async main loop (sgemm_cp_async.cuh) over a block's K range and
// picks the tile from the shape:
//
//   N <= 16: 128 x 16 tiles of 4 warps of 32 x 16, K slices of 32, 2 stages;
//   else:    64 x 64 tiles of 4 warps of 32 x 32, K slices of 16 (v10-64x64).
//
// As in v8, where a problem has too few tiles to give every SM several
// blocks, its K is cut into `splits` ranges of whole slices (at least
// kMinSlicesPerSplit each) and the grid's z covers batch members times
// splits. Unlike v8, which adds the partial products into C with atomics
// (in whatever order they arrive), each split stores its partial tile in a
// workspace, and a second kernel sums the splits of each element in split
// order and writes alpha * sum + beta * C: the result is the same, bit for
// bit, on every run. The workspace (splits x m x n floats per batch
// member; splits are only used when the tiles are few, so it stays under
// about 17 MB) comes from a stream-ordered memory pool of v11's own on each
// device (cudaMallocFromPoolAsync), which keeps up to kWorkspaceKeptBytes
// reserved between launches, and goes back to it after the sum. With one split
// the epilogue is v10's.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <type_traits>

#include "kernels/sgemm_common.cuh"
#include "kernels/sgemm_cp_async.cuh"
#include "kernels/sgemm_launchers.h"

namespace gemm::kernels {
namespace {

// Bytes of workspace a device's pool keeps between launches. The device's
// default pool would hand its memory back at every synchronization, and
// mapping it again takes longer than a skinny product.
constexpr uint64_t kWorkspaceKeptBytes = uint64_t{1} << 30;

using detail::BatchMember;
using detail::CeilDiv;

template <int kBlockM,         // block tile rows (of C)
          int kBlockN,         // block tile columns (of C)
          int kBlockK,         // K slice per pipeline stage
          int kWarpM,          // warp tile rows
          int kWarpN,          // warp tile columns
          int kStages,         // shared-memory stages (slices in flight + 1)
          bool kTransA,        // A is stored transposed (k x m)
          bool kTransB,        // B is stored transposed (n x k)
          bool kVectorAccess>  // 16-byte global accesses allowed
__global__ void __launch_bounds__((kBlockM / kWarpM) * (kBlockN / kWarpN) * 32)
    SgemmPipelinedSplitKKernel(SgemmArgs args, int splits, int k_per_split,
                               float* partials) {
  using Loop = detail::CpAsyncMainloop<kBlockM, kBlockN, kBlockK, kWarpM,
                                       kWarpN, kStages, detail::kRowPad,
                                       kTransA, kTransB, kVectorAccess>;
  extern __shared__ __align__(16) float tiles[];
  // blockIdx.z: batch member * splits + split.
  const int64_t member = blockIdx.z / splits;
  const int split = blockIdx.z % splits;
  const BatchMember p{args.a + member * args.stride_a,
                      args.b + member * args.stride_b,
                      args.c + member * args.stride_c};
  // In int64: near K = 2^31 a split's end passes int's range.
  const int64_t k_begin = int64_t{split} * k_per_split;
  const int k_end =
      static_cast<int>(min(int64_t{args.k}, k_begin + k_per_split));
  Loop loop(blockIdx.y * kBlockM, blockIdx.x * kBlockN);
  loop.Accumulate(args, p, static_cast<int>(k_begin), k_end, tiles);
  loop.ForEachRow4(args.m, [&](int row, int col, const float* acc4) {
    if (splits == 1) {
      detail::StoreOutputRow4<kVectorAccess>(
          p.c + static_cast<int64_t>(row) * args.ldc + col, args.n - col, acc4,
          args.alpha, args.beta);
      return;
    }
    // This split's dense m x n partial tile of this member.
    float* partial = partials +
                     (member * splits + split) * int64_t{args.m} * args.n +
                     static_cast<int64_t>(row) * args.n + col;
#pragma unroll
    for (int n = 0; n < Loop::kThreadN; ++n) {
      if (col + n < args.n) partial[n] = acc4[n];
    }
  });
}

// C = alpha * (sum of the splits' partials, in split order) + beta * C for
// every element of every member (C is not read where beta is 0).
__global__ void SumSplits(SgemmArgs args, int splits, const float* partials) {
  const int64_t per_member = static_cast<int64_t>(args.m) * args.n;
  const int64_t total = per_member * args.batch_count;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t member = i / per_member, within = i % per_member;
    const float* partial = partials + member * splits * per_member + within;
    float sum = 0.f;
    for (int s = 0; s < splits; ++s) sum += partial[s * per_member];
    float* c = args.c + member * args.stride_c + (within / args.n) * args.ldc +
               within % args.n;
    *c =
        args.beta == 0.f ? args.alpha * sum : args.alpha * sum + args.beta * *c;
  }
}

// The shortest K range a split gets, in slices.
constexpr int kMinSlicesPerSplit = 4;

// The tile and stages are as in detail::LaunchCpAsyncChunk.
template <int kBlockM, int kBlockN, int kBlockK, int kWarpM, int kWarpN,
          int kStages,
          int kBlocksPerSm,  // blocks wanted per SM
          bool kOneWave>     // at most kBlocksPerSm per SM: no second wave
cudaError_t Launch(const SgemmArgs& args, cudaStream_t stream) {
  // How many K ranges: enough blocks for kBlocksPerSm per SM (with kOneWave
  // no more than that), each range at least kMinSlicesPerSplit whole slices.
  int device = 0, sms = 132;
  if (cudaGetDevice(&device) == cudaSuccess) {
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  }
  const int64_t tiles = int64_t{CeilDiv(args.m, kBlockM)} *
                        CeilDiv(args.n, kBlockN) * args.batch_count;
  const int64_t wanted =
      kOneWave ? kBlocksPerSm * sms / tiles
               : CeilDiv(kBlocksPerSm * sms,
                         static_cast<int>(std::min<int64_t>(tiles, 1 << 20)));
  const int64_t most = std::max(1, args.k / (kMinSlicesPerSplit * kBlockK));
  // Ranges of whole slices; rounding them up may leave fewer ranges.
  const int k_per_split =
      CeilDiv(CeilDiv(std::max(args.k, 1),
                      static_cast<int>(std::clamp<int64_t>(wanted, 1, most))),
              kBlockK) *
      kBlockK;
  const int splits = CeilDiv(std::max(args.k, 1), k_per_split);
  const bool vector_access = SgemmVectorAccessAllowed(args);
  // The grid's z holds members times splits.
  const int members_per_launch = std::max(1, detail::kMaxGridZ / splits);
  for (int first = 0; first < args.batch_count; first += members_per_launch) {
    const SgemmArgs chunk = detail::BatchChunk(
        args, first, std::min(members_per_launch, args.batch_count - first));
    float* partials = nullptr;
    if (splits > 1) {
      cudaMemPool_t pool;
      cudaError_t err = SgemmWorkspacePool(device, &pool);
      if (err != cudaSuccess) return err;
      err = cudaMallocFromPoolAsync(reinterpret_cast<void**>(&partials),
                                    sizeof(float) * splits * chunk.batch_count *
                                        int64_t{chunk.m} * chunk.n,
                                    pool, stream);
      if (err != cudaSuccess) return err;
    }
    const dim3 grid(CeilDiv(chunk.n, kBlockN), CeilDiv(chunk.m, kBlockM),
                    chunk.batch_count * splits);
    cudaError_t launched = cudaSuccess;
    detail::DispatchTransposes(chunk, [&](auto trans_a, auto trans_b) {
      constexpr bool kTransA = decltype(trans_a)::value,
                     kTransB = decltype(trans_b)::value;
      auto launch = [&](auto vector) {
        constexpr bool kVector = decltype(vector)::value;
        using Loop = detail::CpAsyncMainloop<kBlockM, kBlockN, kBlockK, kWarpM,
                                             kWarpN, kStages, detail::kRowPad,
                                             kTransA, kTransB, kVector>;
        launched =
            Loop::Launch(SgemmPipelinedSplitKKernel<kBlockM, kBlockN, kBlockK,
                                                    kWarpM, kWarpN, kStages,
                                                    kTransA, kTransB, kVector>,
                         grid, stream, chunk, splits, k_per_split, partials);
      };
      vector_access ? launch(std::true_type{}) : launch(std::false_type{});
    });
    // Without the partials there is nothing to sum: C is left as it was.
    if (splits > 1 && launched == cudaSuccess) {
      SumSplits<<<264, 256, 0, stream>>>(chunk, splits, partials);
      launched = cudaGetLastError();
    }
    launched = SgemmWorkspaceRelease(partials, launched, stream);
    cudaGetLastError();  // clears a failed launch's error, returned here
    if (launched != cudaSuccess) return launched;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t SgemmWorkspacePool(int device, cudaMemPool_t* pool) {
  static std::mutex mu;
  static std::map<int, cudaMemPool_t> pools;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = pools.find(device); it != pools.end()) {
    *pool = it->second;
    return cudaSuccess;
  }
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaError_t err = cudaMemPoolCreate(pool, &props);
  if (err != cudaSuccess) return err;
  uint64_t kept = kWorkspaceKeptBytes;
  err = cudaMemPoolSetAttribute(*pool, cudaMemPoolAttrReleaseThreshold, &kept);
  if (err != cudaSuccess) {
    cudaMemPoolDestroy(*pool);
    return err;
  }
  pools[device] = *pool;
  return cudaSuccess;
}

cudaError_t LaunchSgemmPipelinedSplitK(const SgemmArgs& args,
                                       cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return cudaSuccess;
  // The thin tile's 2 stages (39 KB of shared memory) fit 5 blocks on an
  // H100 or H200 SM, and every split then starts at once: with 4 stages
  // (78 KB, 2 blocks) and splits for 4 blocks an SM, 4096 x 16 x 4096 ran
  // in two waves of 8 slices a block, 0.96-0.98x cuBLAS on an H100; as
  // here 1.04-1.08x, and 8192 x 16 x 8192 1.09x against 0.81x (decision
  // 0064). 64 x 64 tiles fit 4 blocks.
  if (args.n <= 16) {
    return Launch<128, 16, 32, 32, 16, 2, 5, true>(args, stream);
  }
  return Launch<64, 64, 16, 32, 32, 4, 4, false>(args, stream);
}

}  // namespace gemm::kernels
