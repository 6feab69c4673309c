// GemmArgs: one job as the client library takes it (the problem, the
// kernel, the server-side budget and the caller's operands), the check made
// before anything is sent, and the job as the wire describes it (GemmParams
// and operand bytes), shared by the unary call and the stream.
//
// Thread-safety: plain values and stateless functions.
//
//   GemmArgs args{.problem = {.m = 64, .n = 64, .k = 64}, .a = a, .b = b};
//   RETURN_IF_ERROR(CheckArgs(args));
//   auto request = wire::EncodeGemmRequest(ParamsOf(args), OperandsOf(args));
#ifndef GEMM_CLIENT_LIB_GEMM_ARGS_H_
#define GEMM_CLIENT_LIB_GEMM_ARGS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/gemm_problem.h"
#include "proto/gemm.pb.h"
#include "proto/wire_codec.h"

namespace gemm::client {

// Bytes of a region the caller registered (GemmClient::RegisterRegion;
// shm_region.h): `offset` bytes into region `region`.
struct RegionOffset {
  // Empty: not in a region.
  std::string region;
  uint64_t offset = 0;
  bool used() const { return !region.empty(); }
};

// One job: the problem (common/gemm_problem.h), how to run it, and the
// caller's operands.
struct GemmArgs {
  GemmProblem problem;
  // "auto" or a name from Info's kernels.
  std::string kernel = "auto";
  // Server-side budget from the job's arrival; 0 = none.
  uint32_t timeout_ms = 0;
  // Whether the server checks the result (ABFT) before returning it:
  // CHECK_DEFAULT leaves it to the server's --check-min-gflop. What the
  // check found comes back in Timing.check.
  v1::Check check = v1::CHECK_DEFAULT;
  // The arithmetic the server may use (GemmParams.precision): float32
  // unless the caller opts in to TF32 or BF16 Tensor Cores. Timing.precision
  // says which ran.
  v1::Precision precision = v1::PRECISION_DEFAULT;
  const float* a = nullptr;  // m*k floats (k*m when trans_a)
  const float* b = nullptr;  // k*n floats (n*k when trans_b)
  const float* c = nullptr;  // m*n floats; may be null when beta == 0
  // Operands in regions instead of in the request: when set, the operand's
  // pointer above is not read (and may be null).
  RegionOffset a_region;
  RegionOffset b_region;
  RegionOffset c_region;
  // The result in a region: the server writes C there and sends none back,
  // so c_out is not written (and may be null).
  RegionOffset result_region;
};

// Runs once per job, on a gRPC thread: the server's timing, or the error.
using GemmCallback = std::function<void(absl::StatusOr<v1::Timing>)>;

// Checks a job's arguments before anything is sent.
absl::Status CheckArgs(const GemmArgs& args);

// Bytes of one operand that go to the server: C only when beta is not 0,
// none of an operand in a region.
uint64_t OperandBytes(const GemmArgs& args, v1::Operand operand);
// The caller's memory of one operand.
const float* OperandData(const GemmArgs& args, v1::Operand operand);
// Bytes of A, B and C that go to the server.
uint64_t JobBytes(const GemmArgs& args);
// Bytes of the result C that come back (m*n floats; none when the result
// goes to a region).
uint64_t ResultBytes(const GemmArgs& args);

// The job's GemmParams (inline_result_max_bytes left 0).
v1::GemmParams ParamsOf(const GemmArgs& args);
// The caller's operands, as the encoder takes them.
wire::Operands OperandsOf(const GemmArgs& args);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_LIB_GEMM_ARGS_H_
