// The shapes of a load test and their shares of the jobs, as given on the
// command line: "MxNxK[:weight],...".
//
// Thread-safety: a stateless function over plain values.
//
//   ASSIGN_OR_RETURN(std::vector<WeightedShape> mix,
//                    ParseShapeMix("128x128x128:0.7,1024x1024x1024:0.3"));
//   options.shapes = mix;  // LoadOptions
#ifndef GEMM_CLIENT_CLI_SHAPE_MIX_H_
#define GEMM_CLIENT_CLI_SHAPE_MIX_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/gemm_problem.h"

namespace gemm::client {

// One shape of a mix and its share of the jobs.
struct WeightedShape {
  GemmProblem problem;
  double weight = 1.0;
};

// Parses "MxNxK[:weight],..." such as "128x128x128:0.7,1024x1024x1024:0.3".
// A missing weight is 1; weights need not add up to 1.
absl::StatusOr<std::vector<WeightedShape>> ParseShapeMix(absl::string_view mix);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_SHAPE_MIX_H_
