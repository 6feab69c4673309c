#include "common/abft.h"

#include <cblas.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/abft_data.h"
#include "common/reference_gemm.h"
#include "gtest/gtest.h"

namespace gemm::abft {
namespace {

using Data = CheckData;

void Fill(std::vector<float>& v, Data kind, std::mt19937_64& rng) {
  FillCheckData(v.data(), v.size(), kind, rng);
}

// A random job, its result by OpenBLAS (float32) and the check's scratch.
struct Job {
  GemmProblem p;
  std::vector<float> a, b, c_in, c;
  std::vector<double> scratch;

  void Run() {
    c = c_in;
    cblas_sgemm(CblasRowMajor, p.trans_a ? CblasTrans : CblasNoTrans,
                p.trans_b ? CblasTrans : CblasNoTrans, p.m, p.n, p.k, p.alpha,
                a.data(), p.lda(), b.data(), p.ldb(), p.beta, c.data(),
                p.ldc());
  }
  // The predictions (and the input C's sums when beta is not 0).
  void Predict() {
    scratch.assign(Layout(p).slots(), 0.0);
    for (const Pass& pass :
         OperandPasses(p, a.data(), b.data(), scratch.data()))
      Reduce2DOnHost(pass);
    if (p.beta != 0) Reduce2DOnHost(InputCPass(p, c_in.data(), scratch.data()));
  }
  Verdict Judge() {
    const Layout l(p);
    std::fill(scratch.begin() + l.row(Layout::kActual),
              scratch.begin() + l.row(Layout::kActual) + p.m, 0.0);
    std::fill(scratch.begin() + l.col(Layout::kActual),
              scratch.begin() + l.col(Layout::kActual) + p.n, 0.0);
    Reduce2DOnHost(OutputCPass(p, c.data(), scratch.data()));
    return JudgeAll(p, scratch.data(),
                    Operands{a.data(), b.data(), c.data(), c_in.data()});
  }
  // The first stage alone: the line bound, no suspect line verified.
  Verdict JudgeLinesOnly() {
    Judge();
    return JudgeAll(p, scratch.data());
  }
};

Job RandomJob(std::mt19937_64& rng, uint32_t max_dim, Data kind) {
  std::uniform_int_distribution<uint32_t> dim(1, max_dim);
  Job job;
  job.p.m = dim(rng);
  job.p.n = dim(rng);
  job.p.k = dim(rng);
  job.p.trans_a = rng() & 1;
  job.p.trans_b = rng() & 1;
  const float scales[] = {1.0f, -0.5f, 3.25f, 1e-3f};
  job.p.alpha = scales[rng() % 4];
  job.p.beta = rng() % 3 == 0 ? 0.0f : scales[rng() % 4];
  job.a.resize(job.p.a_elements());
  job.b.resize(job.p.b_elements());
  job.c_in.resize(job.p.c_elements());
  Fill(job.a, kind, rng);
  Fill(job.b, kind, rng);
  Fill(job.c_in, kind, rng);
  return job;
}

TEST(AbftTest, PredictionsAreTheFloat64SumsOfTheReference) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    Job job = RandomJob(rng, 40, Data::kUniform);
    job.Predict();
    const std::vector<double> want =
        ReferenceGemm(job.p, job.a.data(), job.b.data(), job.c_in.data());
    const Layout l(job.p);
    const GemmProblem& p = job.p;
    for (uint32_t i = 0; i < p.m; ++i) {
      double row = 0;
      for (uint32_t j = 0; j < p.n; ++j) row += want[uint64_t{i} * p.n + j];
      const double predicted = p.alpha * job.scratch[l.row(Layout::kAb) + i] +
                               p.beta * job.scratch[l.row(Layout::kCIn) + i];
      EXPECT_NEAR(predicted, row, 1e-9 * (1 + std::fabs(row))) << i;
    }
    for (uint32_t j = 0; j < p.n; ++j) {
      double col = 0;
      for (uint32_t i = 0; i < p.m; ++i) col += want[uint64_t{i} * p.n + j];
      const double predicted = p.alpha * job.scratch[l.col(Layout::kAb) + j] +
                               p.beta * job.scratch[l.col(Layout::kCIn) + j];
      EXPECT_NEAR(predicted, col, 1e-9 * (1 + std::fabs(col))) << j;
    }
  }
}

// The tolerance is a bound, not an estimate: no clean result fails,
// whatever its data. (gemm-client load --check runs the same on a live
// server: docs/reference/metrics.md.)
TEST(AbftTest, CleanResultsNeverFail) {
  std::mt19937_64 rng(11);
  double worst = 0;
  int jobs = 0;
  for (Data kind : {Data::kUniform, Data::kWideRange, Data::kCancelling}) {
    for (int trial = 0; trial < 4000; ++trial, ++jobs) {
      Job job = RandomJob(rng, trial % 10 == 0 ? 200 : 40, kind);
      job.Run();
      job.Predict();
      const Verdict v = job.Judge();
      ASSERT_TRUE(v.ok()) << job.p.ToString() << " "
                          << LineName(job.p, v.worst_line) << " ratio "
                          << v.worst_ratio;
      EXPECT_EQ(v.unchecked_lines, 0u);
      worst = std::max(worst, v.worst_ratio);
    }
  }
  // Far inside the bound: the honest error is a small part of it.
  EXPECT_LT(worst, 0.5);
  std::printf("%d clean jobs, worst line at %.3g of its tolerance\n", jobs,
              worst);
}

TEST(AbftTest, DeepKNeverFails) {
  std::mt19937_64 rng(13);
  for (Data kind : {Data::kUniform, Data::kWideRange, Data::kCancelling}) {
    Job job = RandomJob(rng, 1, kind);
    job.p.m = 3, job.p.n = 5, job.p.k = 60000;
    job.a.resize(job.p.a_elements());
    job.b.resize(job.p.b_elements());
    job.c_in.resize(job.p.c_elements());
    Fill(job.a, kind, rng);
    Fill(job.b, kind, rng);
    Fill(job.c_in, kind, rng);
    job.Run();
    job.Predict();
    const Verdict v = job.Judge();
    EXPECT_TRUE(v.ok()) << LineName(job.p, v.worst_line) << " at "
                        << v.worst_ratio;
  }
}

// A flipped bit is caught whenever its effect on a line's sum exceeds what
// the line may honestly be off by (its tolerance plus its actual rounding
// error); exponent and sign flips of results of ordinary size always are.
TEST(AbftTest, BitFlipsAboveTheToleranceAreCaught) {
  std::mt19937_64 rng(17);
  int caught_by_bit[32] = {}, tried_by_bit[32] = {};
  for (int trial = 0; trial < 300; ++trial) {
    Job job = RandomJob(rng, 64, Data::kUniform);
    job.Run();
    job.Predict();
    ASSERT_TRUE(job.Judge().ok());
    const std::vector<float> clean = job.c;
    const GemmProblem& p = job.p;
    const uint64_t at = rng() % p.c_elements();
    const uint32_t i = at / p.n, j = at % p.n;
    // The clean lines' honest errors and tolerances.
    const double slack = std::min(Slack(p, job.scratch.data(), i),
                                  Slack(p, job.scratch.data(), p.m + j));
    for (int bit = 0; bit < 32; ++bit) {
      job.c = clean;
      uint32_t word;
      std::memcpy(&word, &job.c[at], 4);
      word ^= 1u << bit;
      std::memcpy(&job.c[at], &word, 4);
      const double effect =
          std::fabs(double{job.c[at]} - double{clean[at]});  // inf for Inf/NaN
      const Verdict v = job.Judge();
      ++tried_by_bit[bit];
      if (!v.ok()) ++caught_by_bit[bit];
      if (effect > slack || std::isnan(job.c[at])) {
        EXPECT_FALSE(v.ok()) << p.ToString() << " bit " << bit << " effect "
                             << effect << " slack " << slack;
      }
      if (bit >= 30 || bit == 23 + 6) {
        // The sign, and the exponent's high bits: always far out.
        if (std::fabs(clean[at]) > 1e-3) {
          EXPECT_FALSE(v.ok()) << bit;
        }
      }
    }
  }
  for (int bit = 0; bit < 32; ++bit) {
    std::printf("bit %2d: caught %3d of %3d\n", bit, caught_by_bit[bit],
                tried_by_bit[bit]);
  }
}

// Inputs converted to TF32 or BF16 (truncated, the worse of the two
// conversions Tensor Cores may make) before float32 sums: the tolerance
// with the precision's input error never fails them, the float32 one does.
TEST(AbftTest, RoundedInputsPassWithTheirPrecisionsTolerance) {
  std::mt19937_64 rng(29);
  int fp32_failures = 0;
  for (const auto& [bits, roundoff] :
       {std::pair{13, 1.0 / (1 << 10)}, std::pair{16, 1.0 / (1 << 7)}}) {
    for (int trial = 0; trial < 300; ++trial) {
      Job job =
          RandomJob(rng, 60, trial % 2 ? Data::kUniform : Data::kWideRange);
      job.Predict();  // from the caller's float32 operands
      // The kernel sees the inputs with their low `bits` bits cleared.
      auto truncate = [bits = bits](std::vector<float>& v) {
        for (float& x : v) {
          uint32_t w;
          std::memcpy(&w, &x, 4);
          w &= ~((1u << bits) - 1);
          std::memcpy(&x, &w, 4);
        }
      };
      const std::vector<float> a = job.a, b = job.b;
      truncate(job.a);
      truncate(job.b);
      job.Run();
      job.a = a, job.b = b;
      const Layout l(job.p);
      std::fill_n(job.scratch.begin() + l.row(Layout::kActual), job.p.m, 0.0);
      std::fill_n(job.scratch.begin() + l.col(Layout::kActual), job.p.n, 0.0);
      Reduce2DOnHost(OutputCPass(job.p, job.c.data(), job.scratch.data()));
      const Verdict v = JudgeAll(job.p, job.scratch.data(), roundoff);
      ASSERT_TRUE(v.ok()) << job.p.ToString() << " bits " << bits << " "
                          << LineName(job.p, v.worst_line) << " at "
                          << v.worst_ratio;
      if (!JudgeAll(job.p, job.scratch.data()).ok()) ++fp32_failures;
    }
  }
  // Without the input term, rounded inputs look like corruption.
  EXPECT_GT(fp32_failures, 100);
}

TEST(AbftTest, NonFiniteOperandsLeaveLinesUnchecked) {
  std::mt19937_64 rng(19);
  Job job = RandomJob(rng, 1, Data::kUniform);
  job.p = GemmProblem{.m = 8, .n = 6, .k = 5, .alpha = 1.0f, .beta = 0.0f};
  job.a.assign(job.p.a_elements(), 0.5f);
  job.b.assign(job.p.b_elements(), 0.25f);
  job.c_in.assign(job.p.c_elements(), 0.0f);
  job.a[2 * 5 + 1] = std::numeric_limits<float>::quiet_NaN();  // row 2 of A
  job.Run();
  job.Predict();
  const Verdict v = job.Judge();
  EXPECT_TRUE(v.ok());
  // Row 2 of C, and every column (each sums row 2): unchecked.
  EXPECT_EQ(v.unchecked_lines, 1u + 6u);
}

TEST(AbftTest, AnInfinityTheOperandsDoNotExplainFails) {
  std::mt19937_64 rng(23);
  Job job = RandomJob(rng, 30, Data::kUniform);
  job.Run();
  job.Predict();
  job.c[0] = std::numeric_limits<float>::infinity();
  const Verdict v = job.Judge();
  EXPECT_FALSE(v.ok());
  EXPECT_TRUE(std::isinf(v.worst_ratio));
}

TEST(AbftTest, LinesThatMayOverflowAreUnchecked) {
  Job job;
  job.p = GemmProblem{.m = 2, .n = 2, .k = 2, .alpha = 1.0f, .beta = 0.0f};
  job.a.assign(4, 3e19f);
  job.b.assign(4, 3e19f);
  job.c_in.assign(4, 0.0f);
  job.Run();  // 1.8e39 each: infinity, rightly
  job.Predict();
  const Verdict v = job.Judge();
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(v.unchecked_lines, 4u);
}

// A kernel sums A*B before alpha scales it: a sum past float32's range is
// infinity however small alpha is, and that is no corruption.
TEST(AbftTest, SumsThatOverflowBeforeAlphaAreUnchecked) {
  Job job;
  job.p = GemmProblem{.m = 2, .n = 2, .k = 2, .alpha = 1e-3f, .beta = 0.0f};
  job.a.assign(4, 3e19f);
  job.b.assign(4, 3e19f);
  job.c_in.assign(4, 0.0f);
  job.Run();  // 1.8e39 before alpha: infinity
  job.Predict();
  const Verdict v = job.Judge();
  EXPECT_TRUE(v.ok()) << LineName(job.p, v.worst_line) << " at "
                      << v.worst_ratio;
  EXPECT_EQ(v.unchecked_lines, 4u);
}

// Issue 39: at 2048^3 and up the line bound is above a sign flip of a
// typical element (a row's honest error is about 1e-4 of it, its bound
// ~100 where a typical element is ~15): the screen sends the flipped
// element's lines to be verified, and the verification catches every sign
// flip and every exponent flip of an element of at least its row's RMS.
TEST(AbftTest, SignAndExponentFlipsOfTypicalElementsAreCaughtAtScale) {
  std::mt19937_64 rng(31);
  Job job = RandomJob(rng, 1, Data::kUniform);
  job.p = GemmProblem{.m = 2048,
                      .n = 1536,
                      .k = 2048,
                      .trans_b = true,
                      .alpha = 1.0f,
                      .beta = 0.0f};
  job.a.resize(job.p.a_elements());
  job.b.resize(job.p.b_elements());
  job.c_in.assign(job.p.c_elements(), 0.0f);
  Fill(job.a, Data::kUniform, rng);
  Fill(job.b, Data::kUniform, rng);
  job.Run();
  job.Predict();
  const Verdict clean = job.Judge();
  ASSERT_TRUE(clean.ok());
  EXPECT_EQ(clean.suspect_lines, 0u);
  const std::vector<float> result = job.c;
  int flips = 0, missed_by_lines = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const uint64_t at = rng() % job.p.c_elements();
    const uint64_t i = at / job.p.n;
    double square = 0;
    for (uint32_t j = 0; j < job.p.n; ++j) {
      square += double{result[i * job.p.n + j]} * result[i * job.p.n + j];
    }
    if (std::fabs(result[at]) < std::sqrt(square / job.p.n)) continue;
    for (int bit : {31, 30, 29, 28, 27, 26, 25, 24, 23}) {
      job.c = result;
      uint32_t word;
      std::memcpy(&word, &job.c[at], 4);
      word ^= 1u << bit;
      std::memcpy(&job.c[at], &word, 4);
      ++flips;
      EXPECT_FALSE(job.Judge().ok()) << "bit " << bit << " at " << at;
      if (job.JudgeLinesOnly().ok()) ++missed_by_lines;
    }
  }
  EXPECT_GT(flips, 0);
  // The line bound alone misses most of them (the defect this fixes).
  EXPECT_GT(missed_by_lines, flips / 4);
  std::printf("%d flips, %d missed by the line bound alone\n", flips,
              missed_by_lines);
}

// Data whose rounding errors conspire (every element of a line computed
// alike, partial sums that climb and fall) makes lines suspect; verified,
// they pass, and past kMaxVerifiedLines the rest keep the line bound.
TEST(AbftTest, StructuredDataIsVerifiedAndPasses) {
  std::mt19937_64 rng(37);
  for (int pattern = 0; pattern < 3; ++pattern) {
    Job job = RandomJob(rng, 1, Data::kUniform);
    job.p = GemmProblem{.m = 700,
                        .n = 900,
                        .k = 3000,
                        .alpha = 1.0f,
                        .beta = pattern == 2 ? 0.5f : 0.0f};
    job.a.resize(job.p.a_elements());
    job.b.assign(job.p.b_elements(), 0.1f);
    job.c_in.assign(job.p.c_elements(), 1.0f / 3.0f);
    for (uint64_t e = 0; e < job.a.size(); ++e) {
      const uint64_t k = e % job.p.k;
      // 0: constant; 1 and 2: up for half of K, then down.
      job.a[e] = pattern == 0 || k < job.p.k / 2 ? 0.1f : -0.1f;
    }
    // Every element alike, summed in order in float32 as v0 sums it: the
    // rounding errors of one element repeat in every other.
    float sum = 0.0f;
    for (uint32_t k = 0; k < job.p.k; ++k) sum += job.a[k] * job.b[0];
    job.c.assign(job.p.c_elements(),
                 job.p.alpha * sum + job.p.beta * job.c_in[0]);
    job.Predict();
    const Verdict v = job.Judge();
    if (pattern == 0) {
      EXPECT_GT(v.suspect_lines, uint64_t{kMaxVerifiedLines});
    }
    EXPECT_TRUE(v.ok()) << pattern << ": " << LineName(job.p, v.worst_line)
                        << " at " << v.worst_ratio;
    EXPECT_LE(v.verified_lines, uint64_t{kMaxVerifiedLines});
    std::printf("pattern %d: %llu suspect lines, %llu verified\n", pattern,
                static_cast<unsigned long long>(v.suspect_lines),
                static_cast<unsigned long long>(v.verified_lines));
  }
}

TEST(AbftTest, VerdictSlotsUnpack) {
  GemmProblem p{.m = 3, .n = 4, .k = 5};
  std::vector<double> scratch(Layout(p).slots(), 0.0);
  uint64_t words[Layout::kVerdictSlots] = {2, 1, 0, 70};
  const float ratio = 7.5f;
  uint32_t bits;
  std::memcpy(&bits, &ratio, 4);
  words[kVerdictWorst] = (uint64_t{bits} << 32) | 5;
  std::memcpy(scratch.data() + Layout(p).verdict(), words, sizeof(words));
  const Verdict v = VerdictFromSlots(scratch.data() + Layout(p).verdict());
  EXPECT_EQ(v.bad_lines, 2u);
  EXPECT_EQ(v.unchecked_lines, 1u);
  EXPECT_EQ(v.suspect_lines, 70u);
  EXPECT_EQ(v.verified_lines, uint64_t{kMaxVerifiedLines});
  EXPECT_EQ(v.worst_ratio, 7.5);
  EXPECT_EQ(LineName(p, v.worst_line), "column 2");
}

}  // namespace
}  // namespace gemm::abft
