#include "client/lib/gemm_args.h"

namespace gemm::client {

absl::Status CheckArgs(const GemmArgs& args) {
  const bool has_a = args.a != nullptr || args.a_region.used();
  const bool has_b = args.b != nullptr || args.b_region.used();
  const bool has_c = args.c != nullptr || args.c_region.used();
  if ((args.problem.k > 0 && (!has_a || !has_b)) ||
      (args.problem.beta != 0.0f && !has_c)) {
    return absl::InvalidArgumentError(
        "GemmArgs: a and b must be set (and c when beta is not 0)");
  }
  return absl::OkStatus();
}

uint64_t OperandBytes(const GemmArgs& args, v1::Operand operand) {
  switch (operand) {
    case v1::OPERAND_A:
      return args.a_region.used() ? 0 : 4 * args.problem.a_elements();
    case v1::OPERAND_B:
      return args.b_region.used() ? 0 : 4 * args.problem.b_elements();
    case v1::OPERAND_C:
      return args.problem.beta != 0.0f && !args.c_region.used()
                 ? 4 * args.problem.c_elements()
                 : 0;
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
  return args.result_region.used() ? 0 : 4 * args.problem.c_elements();
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
  auto ref = [](const RegionOffset& from, v1::RegionRef* to) {
    to->set_region(from.region);
    to->set_offset(from.offset);
  };
  if (args.a_region.used()) ref(args.a_region, params.mutable_a_region());
  if (args.b_region.used()) ref(args.b_region, params.mutable_b_region());
  if (args.c_region.used()) ref(args.c_region, params.mutable_c_region());
  if (args.result_region.used()) {
    ref(args.result_region, params.mutable_result_region());
  }
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
