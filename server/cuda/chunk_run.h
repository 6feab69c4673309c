// One launch of a CUDA batch on one device stream (CudaExecutor's unit of
// work): where the jobs' operands sit in the device block (PackedOperands),
// the copies in, the kernel, the result check (kernels/abft_checksums.h:
// the input C's sums before the kernel, the predictions on the stream's
// side stream beside it, C's sums and the verdicts after it), the copies
// out and the CUDA-event timings of every job.
//
// Thread-safety: RunChunk uses one stream slot, which its caller holds.
//
//   PackedOperands packed(problem, count, /*check=*/true);
//   ASSIGN_OR_RETURN(auto verdicts, RunChunk(chunk, kernel, packed, device,
//                                            stream, pinned, nullptr, 0));
#ifndef GEMM_SERVER_CUDA_CHUNK_RUN_H_
#define GEMM_SERVER_CUDA_CHUNK_RUN_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/abft.h"
#include "kernels/sgemm.h"
#include "server/core/executor.h"
#include "server/cuda/cuda_device.h"

namespace gemm::server {

// Batch members start 256-byte aligned, so v5's 16-byte vector loads apply
// to every member and not only the first.
inline uint64_t PaddedElements(uint64_t elements) {
  return (std::max<uint64_t>(1, elements) + 63) / 64 * 64;
}

// Where one launch's operands sit in its device block: every job's A, then
// every B, then every C, each member padded (PaddedElements); then, for a
// checked batch, every job's check scratch (abft::Layout, in doubles).
struct PackedOperands {
  PackedOperands(const GemmProblem& problem, int jobs, bool check)
      : count(jobs),
        stride_a(PaddedElements(problem.a_elements())),
        stride_b(PaddedElements(problem.b_elements())),
        stride_c(PaddedElements(problem.c_elements())),
        stride_scratch(check ? (abft::Layout(problem).slots() + 31) / 32 * 32
                             : 0) {}
  uint64_t bytes() const {
    return 4 * count * (stride_a + stride_b + stride_c) +
           8 * count * stride_scratch;
  }
  void Place(void* block) {
    a = static_cast<float*>(block);
    b = a + count * stride_a;
    c = b + count * stride_b;
    // 256-byte aligned: every float stride is a multiple of 64.
    scratch = stride_scratch == 0
                  ? nullptr
                  : reinterpret_cast<double*>(c + count * stride_c);
  }
  bool checked() const { return stride_scratch != 0; }

  int count;
  uint64_t stride_a, stride_b, stride_c;  // in floats
  uint64_t stride_scratch;                // in doubles; 0 when unchecked
  float* a = nullptr;
  float* b = nullptr;
  float* c = nullptr;
  double* scratch = nullptr;
};

// The jobs of one launch: batch[begin, begin + count).
struct Chunk {
  const Batch& batch;
  size_t begin;
  int count;
  GemmJob& job(int i) const { return *batch[begin + i]; }
};

// Copies a chunk in, runs it and copies it out on `device`'s stream
// `stream_index`, with the chunk's timings; for a checked chunk, checks it
// and returns each job's verdict (the results of failing jobs are not
// copied out when beta is not 0, so their host C still holds the input).
// `corrupter` (tests only) may change each result after the kernel.
absl::StatusOr<std::vector<abft::Verdict>> RunChunk(
    const Chunk& chunk, const kernels::SgemmKernel& kernel,
    PackedOperands& packed, CudaDevice& device, size_t stream_index,
    HostAllocator* pinned, const ResultCorrupter& corrupter, int run);

}  // namespace gemm::server

#endif  // GEMM_SERVER_CUDA_CHUNK_RUN_H_
