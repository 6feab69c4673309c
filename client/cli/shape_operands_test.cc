#include "client/cli/shape_operands.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "common/reference_gemm.h"
#include "gtest/gtest.h"

namespace gemm::client {
namespace {

constexpr double kTolerance = 1e-5;  // what the load test accepts

// What a correct server returns for `args`: the float64 product, rounded.
std::vector<float> Serve(const GemmArgs& args) {
  std::vector<double> exact =
      ReferenceGemm(args.problem, args.a, args.b, args.c);
  return std::vector<float>(exact.begin(), exact.end());
}

// One job: its scratch buffer and the result a correct server gives it.
struct Job {
  std::unique_ptr<float[]> scratch;
  std::vector<float> c;
};

Job RunJob(const ShapeOperands& shape, uint64_t job) {
  Job run;
  run.scratch = std::make_unique<float[]>(shape.scratch_floats());
  run.c = Serve(shape.JobArgs(job, run.scratch.get()));
  return run;
}

TEST(ShapeOperandsTest, EachJobsResultPassesItsOwnCheck) {
  const ShapeOperands shape =
      ShapeOperands::Create({.m = 37, .n = 29, .k = 41}, 7, true);
  for (uint64_t job : {0, 1, 2, 1000, 5000}) {
    EXPECT_LE(shape.JobError(job, RunJob(shape, job).c.data()), kTolerance)
        << "job " << job;
  }
  const std::vector<float> shared = Serve(shape.SharedArgs());
  EXPECT_EQ(shared.size(), 37u * 29u);
}

TEST(ShapeOperandsTest, NaNFails) {
  const ShapeOperands shape =
      ShapeOperands::Create({.m = 8, .n = 8, .k = 8}, 1, true);
  Job job = RunJob(shape, 3);
  job.c[17] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(shape.JobError(3, job.c.data()) <= kTolerance);
}

// The point of per-job operands: two jobs of one shape expect different
// results, so a result delivered to the wrong job fails that job's check.
TEST(ShapeOperandsTest, AResultHandedToAnotherJobFails) {
  for (const GemmProblem& problem :
       {GemmProblem{.m = 37, .n = 29, .k = 41},
        GemmProblem{.m = 20011, .n = 14, .k = 41},  // A far larger than B
        GemmProblem{.m = 5, .n = 300, .k = 7, .trans_a = true},
        GemmProblem{.m = 64, .n = 64, .k = 64, .trans_b = true}}) {
    const ShapeOperands shape = ShapeOperands::Create(problem, 42, true);
    const Job a = RunJob(shape, 0), b = RunJob(shape, 1);
    EXPECT_NE(a.c, b.c) << problem.ToString();
    EXPECT_LE(shape.JobError(1, b.c.data()), kTolerance);
    EXPECT_GT(shape.JobError(1, a.c.data()), kTolerance) << problem.ToString();
    EXPECT_GT(shape.JobError(0, b.c.data()), kTolerance) << problem.ToString();
  }
}

// Any two jobs close enough to be in flight together, however many that
// is, expect different results.
TEST(ShapeOperandsTest, JobsUpToTwoThousandApartAreTold) {
  const ShapeOperands shape =
      ShapeOperands::Create({.m = 16, .n = 16, .k = 256}, 3, true);
  const Job first = RunJob(shape, 100);
  for (uint64_t other = 101; other < 100 + 2047; other += 13) {
    EXPECT_GT(shape.JobError(other, first.c.data()), 10 * kTolerance)
        << "job " << other;
  }
}

// A swap of part of a result (one 1/16 row block, as a misrouted chunk
// would be) fails too.
TEST(ShapeOperandsTest, ABlockOfAnotherJobsResultFails) {
  const GemmProblem problem{.m = 256, .n = 64, .k = 777};
  const ShapeOperands shape = ShapeOperands::Create(problem, 9, true);
  const Job a = RunJob(shape, 10), b = RunJob(shape, 11);
  std::vector<float> mixed = b.c;
  std::copy_n(a.c.begin(), problem.c_elements() / 16, mixed.begin());
  EXPECT_GT(shape.JobError(11, mixed.data()), kTolerance);
}

}  // namespace
}  // namespace gemm::client
