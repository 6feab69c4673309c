// ShapeOperands: the operands of one shape of a load test, made once, and
// when verifying its float64 answer, also made once; the arguments of each
// job of that shape and the check of its result.
//
// Every verified job sends operands of its own: the smaller of A and B times
// a scale of its own, so that its answer is that scale times the shape's
// reference and a result handed to the wrong job fails that job's check
// (the reasoning is at JobScale in shape_operands.cc).
//
// Thread-safety: const after Create(); JobArgs and JobError may run on any
// thread at once (each job brings its own scratch buffer).
//
//   ShapeOperands shape = ShapeOperands::Create(problem, seed, true);
//   GemmArgs args = shape.JobArgs(job, scratch);  // scratch_floats() floats
//   bool good = shape.JobError(job, c) <= 1e-5;
#ifndef GEMM_CLIENT_CLI_SHAPE_OPERANDS_H_
#define GEMM_CLIENT_CLI_SHAPE_OPERANDS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "client/lib/gemm_args.h"
#include "common/gemm_problem.h"

namespace gemm::client {

class ShapeOperands {
 public:
  // Random A and B of `problem` from `seed` and `seed + 1`; with
  // `verifying`, the float64 answer too.
  static ShapeOperands Create(const GemmProblem& problem, uint64_t seed,
                              bool verifying);

  const GemmProblem& problem() const { return problem_; }

  // Floats of the scratch buffer that JobArgs needs; 0 when not verifying.
  size_t scratch_floats() const;

  // The arguments (problem and operands; kernel and timeout left at their
  // defaults) of verified job `job`: its own operands, written into
  // `scratch` (scratch_floats() floats, left alone until the job ends).
  GemmArgs JobArgs(uint64_t job, float* scratch) const;
  // The arguments of a job that is not checked: the shared operands.
  GemmArgs SharedArgs() const;

  // The relative (Frobenius) error of `c` as the result of verified job
  // `job`; infinity if it holds a NaN or infinity. Requires `verifying`.
  double JobError(uint64_t job, const float* c) const;

 private:
  GemmProblem problem_;
  std::vector<float> a_, b_;
  std::vector<double> want_;  // A B in float64, when verifying
};

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_SHAPE_OPERANDS_H_
