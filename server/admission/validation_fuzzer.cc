// Fuzz target of parameter validation (validation.h): the input's first
// bytes pick the server's limits (max_dim up to 4294967295, as a careless
// operator may set it), the rest is parsed as a GemmParams, validated, and
// the problem's operand byte counts checked with sizes from the input.
// Whatever passes must be a problem the server can hold: dimensions within
// max_dim, sizes that did not wrap, a job within max_job_bytes, a resolved
// kernel. Whatever fails must fail with INVALID_ARGUMENT,
// RESOURCE_EXHAUSTED or (a precision the backend does not compute in)
// UNIMPLEMENTED, and a message of bounded length (client text is quoted,
// cut). Any violation aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/gemm.pb.h"
#include "server/admission/validation.h"
#include "server/cpu/cpu_executor.h"

namespace gemm::server {
namespace {

void Check(bool ok, const char* what, const std::string& detail) {
  if (ok) return;
  std::fprintf(stderr, "validation_fuzzer: %s: %s\n", what, detail.c_str());
  std::abort();
}

uint64_t Take(const uint8_t*& data, size_t& size, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes && size > 0; ++i, ++data, --size) {
    value |= uint64_t{*data} << (8 * i);
  }
  return value;
}

// Longest status message the server may produce for one job: fixed text,
// numbers, and client text cut to 64 bytes.
constexpr size_t kMaxMessageBytes = 512;

void CheckError(const absl::Status& status) {
  Check(absl::IsInvalidArgument(status) || absl::IsResourceExhausted(status) ||
            absl::IsUnimplemented(status),
        "unexpected code", status.ToString());
  Check(status.message().size() <= kMaxMessageBytes, "message too long",
        std::to_string(status.message().size()));
}

}  // namespace
}  // namespace gemm::server

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gemm::server;
  static Executor* executor = [] {
    // Invalid UTF-8 in a string field is a parse failure here, not news.
    google::protobuf::SetLogHandler(nullptr);
    auto cpu = CpuExecutor::Create({.threads = 1});
    if (!cpu.ok()) std::abort();
    return cpu->release();
  }();
  ServiceLimits limits;
  const uint64_t pick = Take(data, size, 1);
  limits.max_dim = pick & 1 ? std::numeric_limits<uint32_t>::max()
                            : static_cast<uint32_t>(1 + Take(data, size, 2));
  limits.max_job_bytes =
      pick & 2 ? std::numeric_limits<uint64_t>::max() : Take(data, size, 5);
  const uint64_t a_bytes = Take(data, size, 4);
  const uint64_t b_bytes = Take(data, size, 4);
  const uint64_t c_bytes = Take(data, size, 4);

  gemm::v1::GemmParams params;
  if (!params.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<JobSpec> spec = ValidateParams(params, limits, *executor);
  if (!spec.ok()) {
    CheckError(spec.status());
    return 0;
  }
  const gemm::GemmProblem& p = spec->problem;
  const std::string shape = p.ToString();
  Check(p.m >= 1 && p.n >= 1, "m or n below 1", shape);
  Check(p.m <= limits.max_dim && p.n <= limits.max_dim && p.k <= limits.max_dim,
        "dimension over max_dim", shape);
  const uint64_t total = p.total_bytes();
  Check(total != std::numeric_limits<uint64_t>::max(), "size wrapped", shape);
  Check(total <= limits.max_job_bytes, "job over max_job_bytes", shape);
  Check(total == 4 * (p.a_elements() + p.b_elements() + p.c_elements()),
        "total_bytes disagrees with the operands", shape);
  Check(spec->kernel.valid(), "kernel unresolved",
        std::string(spec->kernel.name()));
  absl::Status sizes = CheckOperandBytes(p, a_bytes, b_bytes, c_bytes);
  if (sizes.ok()) {
    Check(
        a_bytes == 4 * p.a_elements() && b_bytes == 4 * p.b_elements() &&
            (c_bytes == 4 * p.c_elements() || (c_bytes == 0 && p.beta == 0.0f)),
        "wrong operand sizes accepted", shape);
  } else {
    CheckError(sizes);
  }
  return 0;
}
