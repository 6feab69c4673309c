// JobAssembly: one streamed job being put together from its chunks.
//
// A GemmStream job arrives as a first message with params and then chunks
// of A, B and C, in order within each operand, interleaved with other
// jobs' messages. The assembly copies each chunk straight from gRPC's
// slices to its offset in the job's (pinned) storage and, at end_of_job,
// checks that every operand is complete. Errors are INVALID_ARGUMENT and
// name the job and the problem (an offset out of order, a chunk past the
// operand's end, wrong totals).
//
// Thread-safety: not thread-safe; its stream reactor guards it.
//
//   JobAssembly assembly(std::move(job), params.inline_result_max_bytes());
//   RETURN_IF_ERROR(assembly.Append(request));   // each chunk
//   RETURN_IF_ERROR(assembly.CheckComplete());   // at end_of_job
#ifndef GEMM_SERVER_ADMISSION_JOB_ASSEMBLY_H_
#define GEMM_SERVER_ADMISSION_JOB_ASSEMBLY_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/wire_codec.h"
#include "server/core/gemm_job.h"

namespace gemm::server {

class JobAssembly {
 public:
  // `job_id` is the client's id, used in error messages;
  // `inline_result_max_bytes` comes from the job's params.
  JobAssembly(uint64_t job_id, std::shared_ptr<GemmJob> job,
              uint64_t inline_result_max_bytes);

  // Copies the chunk `in.data` of operand `in.header.operand()` to offset
  // `in.header.offset()`. The data must be non-empty.
  absl::Status Append(const wire::DecodedRequest& in);

  // OK when every operand has exactly its bytes (C may be empty when beta
  // is 0).
  absl::Status CheckComplete() const;

  GemmJob& job() { return *job_; }
  // Hands the job on; the assembly is empty afterwards.
  std::shared_ptr<GemmJob> TakeJob() { return std::move(job_); }
  uint64_t inline_result_max_bytes() const { return inline_result_max_bytes_; }
  // When the job last got data (or started).
  absl::Time last_progress() const { return last_progress_; }
  void set_last_progress(absl::Time t) { last_progress_ = t; }

 private:
  uint64_t job_id_;
  std::shared_ptr<GemmJob> job_;
  uint64_t received_[4] = {0, 0, 0, 0};  // indexed by v1::Operand
  uint64_t inline_result_max_bytes_;
  absl::Time last_progress_ = absl::InfinitePast();
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_ADMISSION_JOB_ASSEMBLY_H_
