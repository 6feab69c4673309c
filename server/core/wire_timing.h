// FillTiming: a finished job's timings as the wire's Timing record (the one
// both the unary response and the stream's JobEnd carry).
//
// Thread-safety: a stateless function; call it once the job is done.
//
//   v1::Timing timing;
//   FillTiming(job, &timing);
//   response = EncodeGemmResponse(c, bytes, timing, owner);
#ifndef GEMM_SERVER_CORE_WIRE_TIMING_H_
#define GEMM_SERVER_CORE_WIRE_TIMING_H_

#include "proto/gemm.pb.h"
#include "server/core/gemm_job.h"

namespace gemm::server {

// Fills `timing` from `job`'s timings, kernel and device; gflops is the
// job's own rate (a batch's is batch_size times it).
void FillTiming(const GemmJob& job, v1::Timing* timing);

}  // namespace gemm::server

#endif  // GEMM_SERVER_CORE_WIRE_TIMING_H_
