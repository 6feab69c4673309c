#include "client/gemm_args.h"

namespace gemm::client {

absl::Status CheckArgs(const GemmArgs& args) {
  if ((args.problem.k > 0 && (args.a == nullptr || args.b == nullptr)) ||
      (args.problem.beta != 0.0f && args.c == nullptr)) {
    return absl::InvalidArgumentError(
        "GemmArgs: a and b must be set (and c when beta is not 0)");
  }
  return absl::OkStatus();
}

uint64_t OperandBytes(const GemmArgs& args, v1::Operand operand) {
  switch (operand) {
    case v1::OPERAND_A:
      return 4 * args.problem.a_elements();
    case v1::OPERAND_B:
      return 4 * args.problem.b_elements();
    case v1::OPERAND_C:
      return args.problem.beta != 0.0f ? 4 * args.problem.c_elements() : 0;
    default:
      return 0;
  }
}

const float* OperandData(const GemmArgs& args, v1::Operand operand) {
  switch (operand) {
    case v1::OPERAND_A:
      return args.a;
    case v1::OPERAND_B:
      return args.b;
    default:
      return args.c;
  }
}

uint64_t JobBytes(const GemmArgs& args) {
  return OperandBytes(args, v1::OPERAND_A) + OperandBytes(args, v1::OPERAND_B) +
         OperandBytes(args, v1::OPERAND_C);
}

uint64_t ResultBytes(const GemmArgs& args) {
  return 4 * args.problem.c_elements();
}

v1::GemmParams ParamsOf(const GemmArgs& args) {
  v1::GemmParams params;
  params.set_m(args.problem.m);
  params.set_n(args.problem.n);
  params.set_k(args.problem.k);
  params.set_trans_a(args.problem.trans_a);
  params.set_trans_b(args.problem.trans_b);
  params.set_alpha(args.problem.alpha);
  params.set_beta(args.problem.beta);
  params.set_kernel(args.kernel);
  params.set_timeout_ms(args.timeout_ms);
  params.set_check(args.check);
  params.set_precision(args.precision);
  return params;
}

wire::Operands OperandsOf(const GemmArgs& args) {
  auto view = [&args](v1::Operand op) {
    return absl::string_view(
        reinterpret_cast<const char*>(OperandData(args, op)),
        OperandBytes(args, op));
  };
  return {view(v1::OPERAND_A), view(v1::OPERAND_B), view(v1::OPERAND_C)};
}

}  // namespace gemm::client
