// check-bench: the result check (ABFT: common/abft.h on the device,
// kernels/abft_checksums.h) measured outside the server, on every kernel of
// the registry, through the same launches the CUDA executor makes.
//
//   --detect: for each size, one job of random operands in [-1, 1] is
//   computed and checked clean; then single bits of result elements are
//   flipped in device memory, one at a time, and the result judged again,
//   with the second stage (suspect lines verified) and without it. Prints
//   caught / tried by bit position and size, for elements at or above
//   their row's RMS (a typical element or larger).
//   --soak: batches of random jobs (odd shapes, transposes, alpha, beta,
//   up to 64 a launch) on every kernel in its own precision, over four
//   kinds of data: uniform in [-1, 1], wide range (2^-20..2^20, both
//   signs), cancelling (+-1000 with small differences) and constant (0.1,
//   whose rounding errors repeat in every element); every clean result
//   must pass. Prints jobs, false positives, suspect and verified lines by
//   kernel and kind.
//
//   check-bench --detect --sizes 1024,2048,4096 --kernel cublas --json d.json
//   check-bench --soak --jobs 20000 --json soak.json
//
// This header: what check_bench.cc (--detect, main) and
// check_bench_soak.cc (--soak) share: launching a checked batch and
// reading its verdicts.
//
// Thread-safety: one thread, one stream.
#ifndef GEMM_KERNELS_CHECK_BENCH_H_
#define GEMM_KERNELS_CHECK_BENCH_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/abft.h"
#include "common/precision.h"
#include "kernels/abft_checksums.h"
#include "kernels/exit_on_cuda_error.h"
#include "kernels/sgemm.h"

namespace gemm::kernels::check_bench {

template <typename T>
T* DeviceAlloc(uint64_t count) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, std::max<uint64_t>(count, 1) * sizeof(T)));
  return static_cast<T*>(p);
}

// One launch's worth of jobs on the device: operands, result and scratch.
struct Launch {
  AbftBatch batch;
  const SgemmKernel* kernel = nullptr;

  SgemmArgs Args() const {
    SgemmArgs args = MakeSgemmArgs(batch.problem, batch.a, batch.b,
                                   const_cast<float*>(batch.c));
    args.batch_count = batch.count;
    args.stride_a = batch.stride_a;
    args.stride_b = batch.stride_b;
    args.stride_c = batch.stride_c;
    return args;
  }
  // The GEMM with its check, as chunk_run.cc runs it (on one stream).
  bool RunChecked(cudaStream_t stream) {
    CHECK_CUDA(LaunchAbftPrepare(batch, stream));
    CHECK_CUDA(LaunchAbftPredict(batch, stream));
    if (!kernel->Launch(Args(), stream).ok()) return false;
    CHECK_CUDA(LaunchAbftJudge(batch, stream));
    return true;
  }
  // Judges the result as it is now: the result's sums and the verdicts
  // cleared first, the predictions kept.
  void Rejudge(cudaStream_t stream) {
    const abft::Layout l(batch.problem);
    for (int i = 0; i < batch.count; ++i) {
      double* s = batch.scratch + i * batch.stride_scratch;
      CHECK_CUDA(cudaMemsetAsync(s + l.row(abft::Layout::kActual), 0, 8 * l.m,
                                 stream));
      CHECK_CUDA(cudaMemsetAsync(s + l.col(abft::Layout::kActual), 0, 8 * l.n,
                                 stream));
      CHECK_CUDA(cudaMemsetAsync(s + l.verdict(), 0,
                                 8 * (l.slots() - l.verdict()), stream));
    }
    CHECK_CUDA(LaunchAbftJudge(batch, stream));
  }
  std::vector<abft::Verdict> Verdicts(cudaStream_t stream) {
    const abft::Layout l(batch.problem);
    std::vector<double> slots(abft::Layout::kVerdictSlots * batch.count);
    CHECK_CUDA(cudaMemcpy2DAsync(slots.data(), 8 * abft::Layout::kVerdictSlots,
                                 batch.scratch + l.verdict(),
                                 8 * batch.stride_scratch,
                                 8 * abft::Layout::kVerdictSlots, batch.count,
                                 cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    std::vector<abft::Verdict> out;
    for (int i = 0; i < batch.count; ++i) {
      out.push_back(abft::VerdictFromSlots(slots.data() +
                                           i * abft::Layout::kVerdictSlots));
    }
    return out;
  }
};

struct DetectOptions {
  std::vector<uint32_t> sizes = {1024, 2048, 4096};
  std::string kernel = "cublas";
  int elements = 48;  // elements flipped per size, each at every bit
  uint64_t seed = 1;
};

// Returns 0 when every clean result passed; the report's JSON in `json`.
int Detect(const DetectOptions& o, std::string* json);

struct SoakOptions {
  int jobs = 20000;  // per kernel and kind of data
  std::string kernels = "all";
  uint64_t seed = 7;
};

// Returns 0 when no clean result failed; the report's JSON in `json`.
int Soak(const SoakOptions& o, std::string* json);

}  // namespace gemm::kernels::check_bench

#endif  // GEMM_KERNELS_CHECK_BENCH_H_
