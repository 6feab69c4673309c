#include "server/cuda/chunk_run.h"

#include <cuda_runtime_api.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/abft_checksums.h"

namespace gemm::server {
namespace {

using kernels::CudaStatus;
using kernels::MakeSgemmArgs;
using kernels::SgemmArgs;
using kernels::SgemmKernel;

// Enqueues one operand's copy to `to` on the device: from host memory (the
// job's storage, or a system region, pinned), or from device memory (a
// CUDA IPC region; a copy between devices when it lives on another).
absl::Status CopyIn(float* to, const float* host, const RegionSpan& region,
                    uint64_t elements, const char* what, cudaStream_t st) {
  const bool on_device = region.device != nullptr;
  return CudaStatus(
      cudaMemcpyAsync(to, on_device ? region.device : host, 4 * elements,
                      on_device ? cudaMemcpyDefault : cudaMemcpyHostToDevice,
                      st),
      what);
}

// Enqueues A, B and (when beta is not 0) C of every job into `packed`.
absl::Status CopyOperandsIn(const Chunk& chunk, const GemmProblem& problem,
                            const PackedOperands& packed, cudaStream_t st) {
  for (int i = 0; i < chunk.count; ++i) {
    GemmJob& job = chunk.job(i);
    RETURN_IF_ERROR(CopyIn(packed.a + i * packed.stride_a, job.a(),
                           job.a_region(), problem.a_elements(), "H2D of A",
                           st));
    RETURN_IF_ERROR(CopyIn(packed.b + i * packed.stride_b, job.b(),
                           job.b_region(), problem.b_elements(), "H2D of B",
                           st));
    if (problem.beta != 0.0f) {
      RETURN_IF_ERROR(CopyIn(packed.c + i * packed.stride_c, job.c_in(),
                             job.c_region(), problem.c_elements(), "H2D of C",
                             st));
    }
  }
  return absl::OkStatus();
}

// Enqueues the whole chunk as one (batched) launch.
absl::Status LaunchPacked(const SgemmKernel& kernel, const GemmProblem& problem,
                          const PackedOperands& packed, cudaStream_t st) {
  SgemmArgs args = MakeSgemmArgs(problem, packed.a, packed.b, packed.c);
  args.batch_count = packed.count;
  args.stride_a = static_cast<int64_t>(packed.stride_a);
  args.stride_b = static_cast<int64_t>(packed.stride_b);
  args.stride_c = static_cast<int64_t>(packed.stride_c);
  return kernel.Launch(args, st);
}

// Enqueues every job's C back into its host storage, except those whose
// `skip` is set (may be null).
absl::Status CopyResultsOut(const Chunk& chunk, const GemmProblem& problem,
                            const PackedOperands& packed, cudaStream_t st,
                            const std::vector<bool>* skip = nullptr) {
  for (int i = 0; i < chunk.count; ++i) {
    if (skip != nullptr && (*skip)[i]) continue;
    GemmJob& job = chunk.job(i);
    // To host memory, or to device memory (a CUDA IPC region).
    float* device_result = job.result_region().device;
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(device_result != nullptr ? device_result : job.c(),
                        packed.c + i * packed.stride_c,
                        4 * problem.c_elements(),
                        device_result != nullptr ? cudaMemcpyDefault
                                                 : cudaMemcpyDeviceToHost,
                        st),
        "D2H of C"));
  }
  return absl::OkStatus();
}

// The stream's events, by what they mark (CudaDevice::Stream::events).
enum Event {
  kStart = 0,
  kCopiedIn = 1,
  kComputed = 2,
  kCopiedOut = 3,
  kPredicted = 4,  // checked batches only, from here on; on the side stream
  kJudged = 5,
  kCopyingOut = 6,
  kPrepared = 7,
};

// Waits for the last event and gives every job of the chunk its times:
// h2d, compute (the whole launch) and d2h; and for a checked chunk the time
// the check added to the batch's path (zeroing its scratch and summing the
// input C before the kernel; after it, waiting for the predictions that ran
// beside the kernel, C's sums and the verdicts), added to what earlier runs
// took.
absl::Status WaitAndRecordTimings(const Chunk& chunk, const CudaDevice& device,
                                  const CudaDevice::Stream& stream,
                                  bool checked) {
  const cudaEvent_t* ev = stream.events;
  RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(ev[kCopiedOut]),
                             absl::StrCat(device.label(), ": batch")));
  auto elapsed = [ev](Event from, Event to) -> absl::StatusOr<absl::Duration> {
    float ms = 0;
    RETURN_IF_ERROR(CudaStatus(cudaEventElapsedTime(&ms, ev[from], ev[to]),
                               "cudaEventElapsedTime"));
    return absl::Microseconds(1000.0 * ms);
  };
  ASSIGN_OR_RETURN(const absl::Duration h2d, elapsed(kStart, kCopiedIn));
  absl::Duration compute, d2h, check;
  if (!checked) {
    ASSIGN_OR_RETURN(compute, elapsed(kCopiedIn, kComputed));
    ASSIGN_OR_RETURN(d2h, elapsed(kComputed, kCopiedOut));
  } else {
    ASSIGN_OR_RETURN(compute, elapsed(kPrepared, kComputed));
    ASSIGN_OR_RETURN(d2h, elapsed(kCopyingOut, kCopiedOut));
    ASSIGN_OR_RETURN(const absl::Duration before,
                     elapsed(kCopiedIn, kPrepared));
    ASSIGN_OR_RETURN(const absl::Duration after, elapsed(kComputed, kJudged));
    check = before + after;
  }
  for (int i = 0; i < chunk.count; ++i) {
    JobTiming& t = chunk.job(i).timing();
    t.h2d = h2d;
    t.compute = compute;
    t.d2h = d2h;
    t.device = device.label();
    if (checked) {
      t.check.ran = true;
      t.check.time += check;
    }
  }
  return absl::OkStatus();
}

absl::Status Record(cudaEvent_t event, cudaStream_t st) {
  return CudaStatus(cudaEventRecord(event, st), "cudaEventRecord");
}

}  // namespace

absl::StatusOr<std::vector<abft::Verdict>> RunChunk(
    const Chunk& chunk, const SgemmKernel& kernel, PackedOperands& packed,
    CudaDevice& device, size_t stream_index, HostAllocator* pinned,
    const ResultCorrupter& corrupter, int run) {
  const GemmProblem& problem = chunk.batch[chunk.begin]->problem();
  const CudaDevice::Stream& stream = device.stream(stream_index);
  const cudaStream_t st = stream.stream;

  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device.ordinal()), "cudaSetDevice"));
  // Each job's verdict slots, in pinned memory (a checked chunk): declared
  // before the block, so that it goes back after the streams are idle.
  constexpr uint64_t kVerdictBytes = 8 * abft::Layout::kVerdictSlots;
  std::optional<HostBuffer> slots;
  if (packed.checked()) slots.emplace(pinned, chunk.count * kVerdictBytes / 4);
  ASSIGN_OR_RETURN(void* block, device.pool().Allocate(packed.bytes()));
  // Whatever happens below, the streams are idle before the block (and the
  // verdict slots) go back.
  struct FreeBlock {
    DeviceMemoryPool& pool;
    cudaStream_t stream;
    cudaStream_t side;
    void* block;
    uint64_t bytes;
    ~FreeBlock() {
      cudaStreamSynchronize(stream);
      cudaStreamSynchronize(side);
      pool.Free(block, bytes);
    }
  } free_block{device.pool(), st, stream.side, block, packed.bytes()};
  packed.Place(block);

  const cudaEvent_t* ev = stream.events;
  const bool checked = packed.checked();
  kernels::AbftBatch abft_batch;
  if (checked) {
    abft_batch = kernels::AbftBatch{problem,
                                    chunk.count,
                                    packed.a,
                                    static_cast<int64_t>(packed.stride_a),
                                    packed.b,
                                    static_cast<int64_t>(packed.stride_b),
                                    packed.c,
                                    static_cast<int64_t>(packed.stride_c),
                                    packed.scratch,
                                    static_cast<int64_t>(packed.stride_scratch),
                                    InputUnitRoundoff(kernel.precision())};
  }
  RETURN_IF_ERROR(Record(ev[kStart], st));
  RETURN_IF_ERROR(CopyOperandsIn(chunk, problem, packed, st));
  RETURN_IF_ERROR(Record(ev[kCopiedIn], st));
  if (checked) {
    // The predictions read only A and B: they run on the side stream,
    // beside the kernel; the input C is summed before the kernel
    // overwrites it.
    RETURN_IF_ERROR(CudaStatus(kernels::LaunchAbftPrepare(abft_batch, st),
                               "result check (input C)"));
    RETURN_IF_ERROR(Record(ev[kPrepared], st));
    RETURN_IF_ERROR(CudaStatus(cudaStreamWaitEvent(stream.side, ev[kPrepared]),
                               "cudaStreamWaitEvent"));
    RETURN_IF_ERROR(
        CudaStatus(kernels::LaunchAbftPredict(abft_batch, stream.side),
                   "result check (predictions)"));
    RETURN_IF_ERROR(Record(ev[kPredicted], stream.side));
  }
  RETURN_IF_ERROR(LaunchPacked(kernel, problem, packed, st));
  RETURN_IF_ERROR(Record(ev[kComputed], st));
  for (int i = 0; i < chunk.count; ++i) {
    chunk.job(i).timing().precision = kernel.precision();
  }
  if (corrupter) {
    for (int i = 0; i < chunk.count; ++i) {
      corrupter(
          ResultSite{&chunk.job(i), packed.c + i * packed.stride_c, st, run});
    }
  }
  std::vector<abft::Verdict> verdicts;
  if (!checked) {
    RETURN_IF_ERROR(CopyResultsOut(chunk, problem, packed, st));
    RETURN_IF_ERROR(Record(ev[kCopiedOut], st));
    RETURN_IF_ERROR(WaitAndRecordTimings(chunk, device, stream, false));
    return verdicts;
  }
  RETURN_IF_ERROR(CudaStatus(cudaStreamWaitEvent(st, ev[kPredicted]),
                             "cudaStreamWaitEvent"));
  RETURN_IF_ERROR(CudaStatus(kernels::LaunchAbftJudge(abft_batch, st),
                             "result check (verdict)"));
  RETURN_IF_ERROR(Record(ev[kJudged], st));
  RETURN_IF_ERROR(CudaStatus(
      cudaMemcpy2DAsync(slots->data(), kVerdictBytes,
                        packed.scratch + abft::Layout(problem).verdict(),
                        8 * packed.stride_scratch, kVerdictBytes, chunk.count,
                        cudaMemcpyDeviceToHost, st),
      "D2H of the check's verdicts"));
  auto read_verdicts = [&] {
    const double* words = reinterpret_cast<const double*>(slots->data());
    verdicts.clear();
    for (int i = 0; i < chunk.count; ++i) {
      verdicts.push_back(
          abft::VerdictFromSlots(words + i * abft::Layout::kVerdictSlots));
    }
  };
  std::vector<bool> failed(chunk.count, false);
  bool to_region = false;
  for (int i = 0; i < chunk.count; ++i) {
    to_region = to_region || chunk.job(i).result_in_region();
  }
  if (problem.beta != 0.0f || to_region) {
    // C comes back only once it passed: a failing job keeps its input C,
    // and a caller's region never holds a result before its verdict.
    RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(st),
                               absl::StrCat(device.label(), ": batch")));
    read_verdicts();
    for (int i = 0; i < chunk.count; ++i) failed[i] = !verdicts[i].ok();
  }
  RETURN_IF_ERROR(Record(ev[kCopyingOut], st));
  RETURN_IF_ERROR(CopyResultsOut(chunk, problem, packed, st, &failed));
  RETURN_IF_ERROR(Record(ev[kCopiedOut], st));
  RETURN_IF_ERROR(WaitAndRecordTimings(chunk, device, stream, true));
  read_verdicts();
  return verdicts;
}

}  // namespace gemm::server
