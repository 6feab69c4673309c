#include "client/lib/split_job.h"

#include <vector>

#include "gtest/gtest.h"

namespace gemm::client {
namespace {

GemmArgs ArgsOf(const GemmProblem& problem, const std::vector<float>& a,
                const std::vector<float>& b, const std::vector<float>& c) {
  GemmArgs args;
  args.problem = problem;
  args.a = a.data();
  args.b = b.data();
  args.c = c.empty() ? nullptr : c.data();
  return args;
}

TEST(CanSplitRowsTest, NeedsPlainAAndAtLeastARowPerPart) {
  GemmArgs args;
  args.problem = {.m = 4, .n = 8, .k = 8};
  EXPECT_TRUE(CanSplitRows(args, 4));
  EXPECT_FALSE(CanSplitRows(args, 5));
  EXPECT_FALSE(CanSplitRows(args, 1));
  args.problem.trans_a = true;
  EXPECT_FALSE(CanSplitRows(args, 2));
  args.problem.trans_a = false;
  args.problem.trans_b = true;  // B goes whole to every part
  EXPECT_TRUE(CanSplitRows(args, 2));
}

// 10 rows in 4 parts: 2, 3, 2, 3 rows, covering every row of A, C and c_out
// once and in order, each part with all of B.
TEST(SplitRowsTest, BlocksCoverEveryRowOnceInOrder) {
  const GemmProblem problem{.m = 10, .n = 3, .k = 5, .beta = 0.5f};
  std::vector<float> a(problem.a_elements()), b(problem.b_elements()),
      c(problem.c_elements()), out(problem.c_elements());
  const GemmArgs args = ArgsOf(problem, a, b, c);
  const std::vector<RowBlock> blocks = SplitRows(args, out.data(), 4);
  ASSERT_EQ(blocks.size(), 4u);
  uint32_t row = 0;
  for (const RowBlock& block : blocks) {
    EXPECT_GE(block.args.problem.m, 2u);
    EXPECT_LE(block.args.problem.m, 3u);
    EXPECT_EQ(block.args.problem.n, problem.n);
    EXPECT_EQ(block.args.problem.k, problem.k);
    EXPECT_EQ(block.args.problem.beta, problem.beta);
    EXPECT_EQ(block.args.a, a.data() + row * problem.k);
    EXPECT_EQ(block.args.b, b.data());
    EXPECT_EQ(block.args.c, c.data() + row * problem.n);
    EXPECT_EQ(block.c_out, out.data() + row * problem.n);
    row += block.args.problem.m;
  }
  EXPECT_EQ(row, problem.m);
}

TEST(SplitRowsTest, NoCWhenTheJobHasNone) {
  const GemmProblem problem{.m = 6, .n = 2, .k = 2};
  std::vector<float> a(problem.a_elements()), b(problem.b_elements()),
      out(problem.c_elements());
  for (const RowBlock& block :
       SplitRows(ArgsOf(problem, a, b, {}), out.data(), 3)) {
    EXPECT_EQ(block.args.c, nullptr);
  }
}

v1::Timing PartTiming(double queue_ms, double compute_ms, uint32_t batch) {
  v1::Timing t;
  t.set_queue_ms(queue_ms);
  t.set_server_ms(queue_ms + compute_ms);
  t.set_h2d_ms(1);
  t.set_compute_ms(compute_ms);
  t.set_d2h_ms(2);
  t.set_batch_size(batch);
  t.set_kernel("v5");
  t.set_device("cuda:0");
  return t;
}

TEST(SplitResultTest, LastPartCallsBackOnceWithTheMergedTiming) {
  int calls = 0;
  absl::StatusOr<v1::Timing> got;
  const GemmProblem whole{.m = 1000, .n = 1000, .k = 1000};
  SplitResult result(whole, 3, [&](absl::StatusOr<v1::Timing> timing) {
    ++calls;
    got = std::move(timing);
  });
  result.PartDone(PartTiming(5, 10, 1));
  result.PartDone(PartTiming(1, 20, 3));
  EXPECT_EQ(calls, 0);
  result.PartDone(PartTiming(3, 30, 2));
  ASSERT_EQ(calls, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_DOUBLE_EQ(got->queue_ms(), 5);    // the longest wait
  EXPECT_DOUBLE_EQ(got->server_ms(), 33);  // the longest part
  EXPECT_DOUBLE_EQ(got->h2d_ms(), 3);      // device work adds up
  EXPECT_DOUBLE_EQ(got->compute_ms(), 60);
  EXPECT_DOUBLE_EQ(got->d2h_ms(), 6);
  EXPECT_EQ(got->batch_size(), 3u);
  EXPECT_EQ(got->kernel(), "v5");
  EXPECT_EQ(got->device(), "cuda:0");
  EXPECT_DOUBLE_EQ(got->gflops(), whole.flops() / (60 * 1e6));
}

TEST(SplitResultTest, FirstErrorWinsAfterEveryPartEnded) {
  int calls = 0;
  absl::StatusOr<v1::Timing> got;
  SplitResult result({.m = 4, .n = 4, .k = 4}, 3,
                     [&](absl::StatusOr<v1::Timing> timing) {
                       ++calls;
                       got = std::move(timing);
                     });
  result.PartDone(absl::UnavailableError("queue full"));
  result.PartDone(PartTiming(1, 1, 1));
  EXPECT_EQ(calls, 0);
  result.PartDone(absl::InternalError("device failed"));
  ASSERT_EQ(calls, 1);
  EXPECT_EQ(got.status(), absl::UnavailableError("queue full"));
}

}  // namespace
}  // namespace gemm::client
