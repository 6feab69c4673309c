// Checks requests at the service edge, before any job exists.
//
// Every error names the offending field, so a caller can fix its request
// from the message alone. Malformed input is INVALID_ARGUMENT; input over
// the configured limits is RESOURCE_EXHAUSTED.
//
// Thread-safety: stateless functions.
//
//   ASSIGN_OR_RETURN(JobSpec spec,
//                    ValidateParams(request.params(), limits, executor));
//   RETURN_IF_ERROR(CheckOperandBytes(spec.problem, request.a().size(), ...));
#ifndef GEMM_SERVER_ADMISSION_VALIDATION_H_
#define GEMM_SERVER_ADMISSION_VALIDATION_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/gemm.pb.h"
#include "server/core/executor.h"
#include "server/core/gemm_job.h"

namespace gemm::server {

// Size limits of the service; see proto/gemm.proto's Limits.
struct ServiceLimits {
  // Largest M, N or K. Default 65536.
  uint32_t max_dim = 65536;
  // Largest job (A, B and C together), in bytes. Default 2 GiB.
  uint64_t max_job_bytes = uint64_t{2} << 30;
  // Bytes of all accepted, unfinished jobs together. Default 8 GiB.
  uint64_t max_inflight_bytes = uint64_t{8} << 30;
  // Largest gRPC message the server receives or sends (so a unary result
  // must fit in one too). Default 64 MiB.
  uint64_t max_message_bytes = uint64_t{64} << 20;
  // Size of the result chunks on the stream. Default 1 MiB (4 MiB measured
  // no faster: docs/reference/performance.md).
  uint64_t result_chunk_bytes = uint64_t{1} << 20;
  // A streamed job being received that gets no data for this long fails
  // with DEADLINE_EXCEEDED and gives back its budget, so that jobs declared
  // and never sent cannot hold the budget. Default 30 s; zero: never.
  absl::Duration job_stall_timeout = absl::Seconds(30);
  // One client's (its address's) part of max_inflight_bytes: what its jobs
  // (counted from declaration until gRPC has sent the answer) may hold
  // (ClientInflightBytes). One client at its limits leaves three quarters
  // of the budget to the others. Default 0.25; 1: no per-client limit.
  double client_inflight_share = 0.25;
  // Jobs one client may hold, from declaration until the answer is handed
  // to gRPC, and as many answers not yet sent plus ClientShare::kAnswersLag
  // (client_shares.h). Default 4096; 0: no per-client limit.
  uint64_t max_client_jobs = 4096;
  // Jobs of one stream being received at once (declared, not yet
  // complete); past it a new job fails with RESOURCE_EXHAUSTED. Default
  // 256; 0: no limit.
  uint64_t max_open_jobs_per_stream = 256;
  // Jobs of at least this many floating-point operations (2*M*N*K) have
  // their result checked (ABFT, GemmParams.check) unless they say
  // otherwise. Default 0: none unless they ask.
  double check_min_flops = 0;
};

// What a job costs the server beyond its matrices (the job and its entries
// in the call's tables; measured at about 620 bytes), claimed from the
// in-flight budget with them, so that a flood of tiny jobs is bounded too.
inline constexpr uint64_t kJobBookkeepingBytes = 1024;

// The in-flight budget a job of `problem` claims: its bytes (saturated)
// plus the bookkeeping.
uint64_t JobClaimBytes(const GemmProblem& problem);
// The same for `spec`, whose operands in regions claim nothing (the
// caller's memory holds them), nor does C when both the input C and the
// result are in regions.
uint64_t JobClaimBytes(const JobSpec& spec);

// The claim of the largest job the limits allow. The in-flight budget and
// a client's share are never smaller (JobIntake raises them to it), so
// that --max-job-bytes equal to --max-inflight-bytes still admits such a
// job: the budget then holds its bookkeeping on top.
uint64_t LargestJobClaimBytes(const ServiceLimits& limits);

// The in-flight budget in force: --max-inflight-bytes, raised to the
// largest job's claim.
uint64_t InflightBudgetBytes(const ServiceLimits& limits);

// One client's part of the budget in bytes, from client_inflight_share: 0
// (no limit) at a share of 1, else at least 1 byte (JobIntake raises it to
// the largest job's claim).
uint64_t ClientInflightBytes(const ServiceLimits& limits);

// Text from a client, quoted for a status message: at most `max_bytes` of
// it, and its length when cut ("'xxxx...' (100000 bytes)"), so that an error
// never grows with the request (a long echo can exceed the caller's
// metadata limit).
std::string QuoteClientText(absl::string_view text, size_t max_bytes = 64);

// Validates `params` against the limits and resolves its kernel through
// `executor`.
absl::StatusOr<JobSpec> ValidateParams(const v1::GemmParams& params,
                                       const ServiceLimits& limits,
                                       const Executor& executor);

// Bytes an operand must have; C's may also be 0 when beta is 0.
uint64_t ExpectedBytes(const GemmProblem& problem, v1::Operand operand);
// Bytes an operand must have in the request: 0 when it is in a region.
uint64_t ExpectedBytes(const JobSpec& spec, v1::Operand operand);

// Checks the byte counts of a complete job's operands.
absl::Status CheckOperandBytes(const GemmProblem& problem, uint64_t a_bytes,
                               uint64_t b_bytes, uint64_t c_bytes);
// The same for `spec`: an operand in a region must come with no bytes.
absl::Status CheckOperandBytes(const JobSpec& spec, uint64_t a_bytes,
                               uint64_t b_bytes, uint64_t c_bytes);

// Longest region name (RegisterRegionRequest.name).
inline constexpr size_t kMaxRegionNameBytes = 128;
// Checks a region's name: 1 to kMaxRegionNameBytes printable ASCII
// characters. `field` names it in the error.
absl::Status CheckRegionName(absl::string_view field, absl::string_view name);

// Checks that the unary call's answer, C in one GemmResponse, fits in a
// message of limits.max_message_bytes: RESOURCE_EXHAUSTED, naming both
// sizes and GemmStream, when it does not. Checked before the job runs.
absl::Status CheckUnaryResultBytes(const GemmProblem& problem,
                                   const ServiceLimits& limits);

}  // namespace gemm::server

#endif  // GEMM_SERVER_ADMISSION_VALIDATION_H_
