#include "server/admission/validation.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "proto/wire_codec.h"

namespace gemm::server {
namespace {

absl::Status CheckDim(const char* field, uint32_t value, uint32_t min,
                      const ServiceLimits& limits) {
  if (value < min) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "params.%s: must be at least %d, got %d", field, min, value));
  }
  if (value > limits.max_dim) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("params.%s: %d exceeds the server's max_dim of %d",
                        field, value, limits.max_dim));
  }
  return absl::OkStatus();
}

absl::Status CheckBytes(const char* field, uint64_t got, uint64_t expected,
                        const char* formula, const GemmProblem& s) {
  if (got == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: expected %d bytes (%s*4 for M=%d N=%d K=%d%s%s), got %d", field,
      expected, formula, s.m, s.n, s.k, s.trans_a ? " trans_a" : "",
      s.trans_b ? " trans_b" : "", got));
}

// Longer than any kernel name a server has.
constexpr size_t kMaxKernelNameBytes = 64;

}  // namespace

std::string QuoteClientText(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return absl::StrCat("'", text, "'");
  return absl::StrCat("'", text.substr(0, max_bytes), "...' (", text.size(),
                      " bytes)");
}

absl::StatusOr<JobSpec> ValidateParams(const v1::GemmParams& params,
                                       const ServiceLimits& limits,
                                       const Executor& executor) {
  JobSpec spec;
  GemmProblem& problem = spec.problem;
  RETURN_IF_ERROR(CheckDim("m", params.m(), 1, limits));
  RETURN_IF_ERROR(CheckDim("n", params.n(), 1, limits));
  RETURN_IF_ERROR(CheckDim("k", params.k(), 0, limits));
  problem.m = params.m();
  problem.n = params.n();
  problem.k = params.k();
  problem.trans_a = params.trans_a();
  problem.trans_b = params.trans_b();
  // total_bytes() saturates: 2^64 - 1 means the true size does not fit in
  // 64 bits, whatever the limit says.
  if (problem.total_bytes() == std::numeric_limits<uint64_t>::max()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "params: a %s job needs 2^64 bytes or more for A, B and C",
        problem.ToString()));
  }
  if (problem.total_bytes() > limits.max_job_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "params: a %s job needs %d bytes for A, B and C, over the server's "
        "max_job_bytes of %d",
        problem.ToString(), problem.total_bytes(), limits.max_job_bytes));
  }
  problem.alpha = params.alpha();
  problem.beta = params.beta();
  spec.timeout = absl::Milliseconds(params.timeout_ms());
  switch (params.check()) {
    case v1::CHECK_ABFT:
      spec.check = true;
      break;
    case v1::CHECK_OFF:
      spec.check = false;
      break;
    case v1::CHECK_DEFAULT:
      spec.check = limits.check_min_flops > 0 &&
                   problem.flops() >= limits.check_min_flops;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "params.check: unknown value ", static_cast<int>(params.check()),
          " (CHECK_DEFAULT 0, CHECK_ABFT 1, CHECK_OFF 2)"));
  }
  // K = 0 multiplies nothing: C = beta * C has nothing to check.
  if (problem.k == 0) spec.check = false;
  if (params.kernel().size() > kMaxKernelNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("params.kernel: unknown kernel ",
                     QuoteClientText(params.kernel()), "; see Info's kernels"));
  }
  Precision precision = Precision::kFp32;
  switch (params.precision()) {
    case v1::PRECISION_DEFAULT:
    case v1::PRECISION_FP32:
      break;
    case v1::PRECISION_FP32_TENSOR:
      precision = Precision::kFp32Tensor;
      break;
    case v1::PRECISION_TF32:
      precision = Precision::kTf32;
      break;
    case v1::PRECISION_BF16:
      precision = Precision::kBf16;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "params.precision: unknown value ",
          static_cast<int>(params.precision()),
          " (PRECISION_FP32 1, PRECISION_FP32_TENSOR 2, PRECISION_TF32 3, "
          "PRECISION_BF16 4)"));
  }
  ASSIGN_OR_RETURN(spec.kernel,
                   executor.ResolveKernel(problem, params.kernel(), precision));
  auto region_ref = [](const char* field, bool present,
                       const v1::RegionRef& ref,
                       RegionRef* out) -> absl::Status {
    if (!present) return absl::OkStatus();
    RETURN_IF_ERROR(CheckRegionName(absl::StrCat("params.", field, ".region"),
                                    ref.region()));
    if (ref.offset() % 4 != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "params.%s.offset: %d is not a multiple of 4 (float32 operands)",
          field, ref.offset()));
    }
    out->region = ref.region();
    out->offset = ref.offset();
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(region_ref("a_region", params.has_a_region(),
                             params.a_region(), &spec.a_region));
  RETURN_IF_ERROR(region_ref("b_region", params.has_b_region(),
                             params.b_region(), &spec.b_region));
  RETURN_IF_ERROR(region_ref("c_region", params.has_c_region(),
                             params.c_region(), &spec.c_region));
  RETURN_IF_ERROR(region_ref("result_region", params.has_result_region(),
                             params.result_region(), &spec.result_region));
  // With beta 0 the input C is not read, wherever it is.
  if (problem.beta == 0.0f) spec.c_region = RegionRef();
  return spec;
}

absl::Status CheckRegionName(absl::string_view field, absl::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": empty"));
  }
  if (name.size() > kMaxRegionNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", name.size(), " bytes, longer than the ",
                     kMaxRegionNameBytes, " a region's name may have"));
  }
  for (char ch : name) {
    if (ch < 0x21 || ch > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", QuoteClientText(name),
          " has a character that is not printable ASCII (or a space)"));
    }
  }
  return absl::OkStatus();
}

uint64_t ExpectedBytes(const JobSpec& spec, v1::Operand operand) {
  const bool in_region = (operand == v1::OPERAND_A && spec.a_region.used()) ||
                         (operand == v1::OPERAND_B && spec.b_region.used()) ||
                         (operand == v1::OPERAND_C && spec.c_region.used());
  return in_region ? 0 : ExpectedBytes(spec.problem, operand);
}

absl::Status CheckOperandBytes(const JobSpec& spec, uint64_t a_bytes,
                               uint64_t b_bytes, uint64_t c_bytes) {
  auto both = [](const char* operand, uint64_t bytes, const RegionRef& ref) {
    return absl::InvalidArgumentError(
        absl::StrCat(operand, ": ", bytes, " bytes sent, but params.", operand,
                     "_region puts it in region ", QuoteClientText(ref.region),
                     "; send one or the other"));
  };
  if (spec.a_region.used() && a_bytes > 0)
    return both("a", a_bytes, spec.a_region);
  if (spec.b_region.used() && b_bytes > 0)
    return both("b", b_bytes, spec.b_region);
  if (spec.c_region.used() && c_bytes > 0)
    return both("c", c_bytes, spec.c_region);
  const GemmProblem& s = spec.problem;
  if (!spec.a_region.used()) {
    RETURN_IF_ERROR(CheckBytes("a", a_bytes, ExpectedBytes(s, v1::OPERAND_A),
                               s.trans_a ? "K*M" : "M*K", s));
  }
  if (!spec.b_region.used()) {
    RETURN_IF_ERROR(CheckBytes("b", b_bytes, ExpectedBytes(s, v1::OPERAND_B),
                               s.trans_b ? "N*K" : "K*N", s));
  }
  if (spec.c_region.used()) return absl::OkStatus();
  // A and B are right by now; C alone decides.
  return CheckOperandBytes(s, ExpectedBytes(s, v1::OPERAND_A),
                           ExpectedBytes(s, v1::OPERAND_B), c_bytes);
}

uint64_t ExpectedBytes(const GemmProblem& problem, v1::Operand operand) {
  switch (operand) {
    case v1::OPERAND_A:
      return 4 * problem.a_elements();
    case v1::OPERAND_B:
      return 4 * problem.b_elements();
    case v1::OPERAND_C:
      return 4 * problem.c_elements();
    default:
      return 0;
  }
}

absl::Status CheckOperandBytes(const GemmProblem& problem, uint64_t a_bytes,
                               uint64_t b_bytes, uint64_t c_bytes) {
  const GemmProblem& s = problem;
  RETURN_IF_ERROR(CheckBytes("a", a_bytes, ExpectedBytes(s, v1::OPERAND_A),
                             s.trans_a ? "K*M" : "M*K", s));
  RETURN_IF_ERROR(CheckBytes("b", b_bytes, ExpectedBytes(s, v1::OPERAND_B),
                             s.trans_b ? "N*K" : "K*N", s));
  if (problem.beta == 0.0f && c_bytes == 0) return absl::OkStatus();
  absl::Status c_status =
      CheckBytes("c", c_bytes, ExpectedBytes(s, v1::OPERAND_C), "M*N", s);
  if (!c_status.ok() && problem.beta != 0.0f && c_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "c: missing, but beta is ", problem.beta, "; send C or set beta to 0"));
  }
  return c_status;
}

absl::Status CheckUnaryResultBytes(const GemmProblem& problem,
                                   const ServiceLimits& limits) {
  const uint64_t c_bytes = 4 * problem.c_elements();
  if (c_bytes + wire::kResultMessageOverheadBytes <= limits.max_message_bytes) {
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrFormat(
      "result: C is %d bytes (M*N*4 for M=%d N=%d), which with up to %d "
      "bytes of response header exceeds max_message_bytes (%d); use "
      "GemmStream, which returns results in chunks",
      c_bytes, problem.m, problem.n, wire::kResultMessageOverheadBytes,
      limits.max_message_bytes));
}

uint64_t JobClaimBytes(const GemmProblem& problem) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  const uint64_t bytes = problem.total_bytes();
  return bytes > kMax - kJobBookkeepingBytes ? kMax
                                             : bytes + kJobBookkeepingBytes;
}

uint64_t JobClaimBytes(const JobSpec& spec) {
  const GemmProblem& p = spec.problem;
  if (!spec.a_region.used() && !spec.b_region.used() &&
      !spec.result_region.used()) {
    return JobClaimBytes(p);
  }
  // No saturation needed: the size limits have bounded every operand.
  uint64_t bytes = kJobBookkeepingBytes;
  if (!spec.a_region.used()) bytes += 4 * p.a_elements();
  if (!spec.b_region.used()) bytes += 4 * p.b_elements();
  if (GemmJob::NeedsOwnC(spec)) bytes += 4 * p.c_elements();
  return bytes;
}

uint64_t LargestJobClaimBytes(const ServiceLimits& limits) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  return limits.max_job_bytes > kMax - kJobBookkeepingBytes
             ? kMax
             : limits.max_job_bytes + kJobBookkeepingBytes;
}

uint64_t InflightBudgetBytes(const ServiceLimits& limits) {
  return std::max(limits.max_inflight_bytes, LargestJobClaimBytes(limits));
}

uint64_t ClientInflightBytes(const ServiceLimits& limits) {
  if (limits.client_inflight_share >= 1.0) return 0;
  return std::max<uint64_t>(
      1, static_cast<uint64_t>(limits.client_inflight_share *
                               static_cast<double>(limits.max_inflight_bytes)));
}

}  // namespace gemm::server
