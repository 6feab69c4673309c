#include "common/gemm_problem.h"

#include <cstdio>

namespace gemm {

std::string GemmProblem::ToString() const {
  char text[64];
  std::snprintf(text, sizeof(text), "%ux%ux%u%s%s", m, n, k,
                trans_a ? " A^T" : "", trans_b ? " B^T" : "");
  return text;
}

}  // namespace gemm
