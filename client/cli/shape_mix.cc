#include "client/cli/shape_mix.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gemm::client {

absl::StatusOr<std::vector<WeightedShape>> ParseShapeMix(
    absl::string_view mix) {
  std::vector<WeightedShape> shapes;
  for (absl::string_view part : absl::StrSplit(mix, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> shape_weight = absl::StrSplit(part, ':');
    std::vector<absl::string_view> dims = absl::StrSplit(shape_weight[0], 'x');
    WeightedShape shape;
    if (shape_weight.size() > 2 || dims.size() != 3 ||
        !absl::SimpleAtoi(dims[0], &shape.problem.m) ||
        !absl::SimpleAtoi(dims[1], &shape.problem.n) ||
        !absl::SimpleAtoi(dims[2], &shape.problem.k) || shape.problem.m == 0 ||
        shape.problem.n == 0 ||
        (shape_weight.size() == 2 &&
         (!absl::SimpleAtod(shape_weight[1], &shape.weight) ||
          !(shape.weight > 0)))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shapes: '", part,
          "' is not MxNxK[:weight] (M, N >= 1, K >= 0, weight > 0)"));
    }
    shapes.push_back(shape);
  }
  if (shapes.empty()) {
    return absl::InvalidArgumentError("shapes: no shape given");
  }
  return shapes;
}

}  // namespace gemm::client
