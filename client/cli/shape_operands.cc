#include "client/cli/shape_operands.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/reference_gemm.h"

namespace gemm::client {
namespace {

// Why a scale, and why these. A result must fail every job's check but its
// own, while the reference stays one float64 product per shape and a job's
// operands cost little to make. Scaling one operand by s scales the product
// by s, so job j's answer is s_j times the shape's reference. alpha would
// do the same for nothing, but the server batches only jobs of one alpha
// (JobSpec::SameBatchAs), so per-job alphas would change the load under
// test; scaled operands leave alpha, beta and batching alone. The operand
// scaled is the smaller of A and B, so a job costs one pass over
// min(m*k, k*n) floats besides the NaN fill and the check over C.
//
// The scales: every float with 9 significant bits in [1/16, 16) but 1,
// 2047 of them, so jobs up to 2046 apart (far more than are ever in flight
// together) never share one. Two of them differ by at least 2^-9 relative,
// so another job's result is at least 2e-3 off, 200 times the 1e-5 the
// check allows, and a chunk of another job's result covering a share f of
// C is about 2e-3 * sqrt(f) off: any chunk of over 1/30,000 of C fails.
// s_j * x rounds once in float32 (2^-24 relative per element), and the
// kernel's own rounding is relative, so a correct result passes as before.
// The shared operands (scale 1) are none of them: a result of a job that is
// not checked fails a checked job's check too.
constexpr uint64_t kScales = 2047;

float JobScale(uint64_t job) {
  // v in [0, 2048) but 1024 (which is 1.0); job 0 gets 1 + 1/256.
  const int v = static_cast<int>((1025 + job % kScales) % 2048);
  return std::ldexp(1.0f + (v % 256) / 256.0f, v / 256 - 4);
}

}  // namespace

ShapeOperands ShapeOperands::Create(const GemmProblem& problem, uint64_t seed,
                                    bool verifying) {
  ShapeOperands shape;
  shape.problem_ = problem;
  shape.a_.resize(problem.a_elements());
  shape.b_.resize(problem.b_elements());
  FillRandom(shape.a_.data(), shape.a_.size(), seed);
  FillRandom(shape.b_.data(), shape.b_.size(), seed + 1);
  if (verifying) {
    shape.want_ =
        ReferenceGemm(problem, shape.a_.data(), shape.b_.data(), nullptr);
  }
  return shape;
}

size_t ShapeOperands::scratch_floats() const {
  return want_.empty() ? 0 : std::min(a_.size(), b_.size());
}

GemmArgs ShapeOperands::SharedArgs() const {
  GemmArgs args;
  args.problem = problem_;
  args.a = a_.data();
  args.b = b_.data();
  return args;
}

GemmArgs ShapeOperands::JobArgs(uint64_t job, float* scratch) const {
  GemmArgs args = SharedArgs();
  const float scale = JobScale(job);
  const bool scale_a = a_.size() <= b_.size();
  const std::vector<float>& shared = scale_a ? a_ : b_;
  for (size_t i = 0; i < shared.size(); ++i) scratch[i] = scale * shared[i];
  (scale_a ? args.a : args.b) = scratch;
  return args;
}

double ShapeOperands::JobError(uint64_t job, const float* c) const {
  const double scale = JobScale(job);
  double diff = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < want_.size(); ++i) {
    if (!std::isfinite(c[i])) return std::numeric_limits<double>::infinity();
    const double want = scale * want_[i];
    const double d = static_cast<double>(c[i]) - want;
    diff += d * d;
    norm += want * want;
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace gemm::client
