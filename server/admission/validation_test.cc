#include "server/admission/validation.h"

#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "server/cpu/cpu_executor.h"

namespace gemm::server {
namespace {

class ValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto executor = CpuExecutor::Create({});
    ASSERT_TRUE(executor.ok());
    executor_ = std::move(*executor);
  }
  v1::GemmParams Params(uint32_t m, uint32_t n, uint32_t k) {
    v1::GemmParams p;
    p.set_m(m);
    p.set_n(n);
    p.set_k(k);
    p.set_alpha(1);
    return p;
  }
  ServiceLimits limits_;
  std::unique_ptr<CpuExecutor> executor_;
};

void ExpectError(const absl::Status& s, absl::StatusCode code,
                 absl::string_view field) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_NE(s.message().find(field), absl::string_view::npos)
      << "message should name " << field << ": " << s.message();
}

TEST_F(ValidationTest, AcceptsAValidProblemAndResolvesItsKernel) {
  v1::GemmParams p = Params(10, 20, 30);
  p.set_trans_b(true);
  p.set_beta(0.5f);
  p.set_timeout_ms(250);
  auto problem = ValidateParams(p, limits_, *executor_);
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_TRUE(
      problem->problem.SameShapeAs(GemmProblem{10, 20, 30, false, true}));
  EXPECT_EQ(problem->kernel.name(), "cpu");
  EXPECT_EQ(problem->problem.beta, 0.5f);
  EXPECT_EQ(problem->timeout, absl::Milliseconds(250));
}

// Operands in regions claim no budget; C claims it only where the server
// holds it: for a result sent back, or an input C sent with the request.
TEST_F(ValidationTest, RegionOperandsClaimOnlyWhatTheServerHolds) {
  auto spec_of = [&](float beta, bool a, bool b, bool c, bool result) {
    v1::GemmParams p = Params(100, 200, 300);
    p.set_beta(beta);
    if (a) p.mutable_a_region()->set_region("r");
    if (b) p.mutable_b_region()->set_region("r");
    if (c) p.mutable_c_region()->set_region("r");
    if (result) p.mutable_result_region()->set_region("r");
    auto spec = ValidateParams(p, limits_, *executor_);
    EXPECT_TRUE(spec.ok()) << spec.status();
    return *spec;
  };
  const uint64_t a = 4 * 100 * 300, b = 4 * 300 * 200, c = 4 * 100 * 200;
  const uint64_t own = kJobBookkeepingBytes;
  EXPECT_EQ(JobClaimBytes(spec_of(0, false, false, false, false)),
            own + a + b + c);
  EXPECT_EQ(JobClaimBytes(spec_of(0, true, true, false, true)), own);
  EXPECT_EQ(JobClaimBytes(spec_of(0, true, true, true, true)), own)
      << "beta 0: C is not read";
  EXPECT_EQ(JobClaimBytes(spec_of(2, true, true, false, true)), own + c)
      << "the input C comes with the request";
  EXPECT_EQ(JobClaimBytes(spec_of(2, true, true, true, true)), own);
  EXPECT_EQ(JobClaimBytes(spec_of(2, true, false, true, false)), own + b + c);
  v1::GemmParams bad = Params(4, 4, 4);
  bad.mutable_b_region()->set_region("r");
  bad.mutable_b_region()->set_offset(6);
  ExpectError(ValidateParams(bad, limits_, *executor_).status(),
              absl::StatusCode::kInvalidArgument, "params.b_region.offset");
  bad.mutable_b_region()->set_offset(0);
  bad.mutable_b_region()->set_region("has space");
  ExpectError(ValidateParams(bad, limits_, *executor_).status(),
              absl::StatusCode::kInvalidArgument, "params.b_region.region");
}

TEST_F(ValidationTest, ZeroDimensionsNameTheField) {
  ExpectError(ValidateParams(Params(0, 5, 5), limits_, *executor_).status(),
              absl::StatusCode::kInvalidArgument, "params.m");
  ExpectError(ValidateParams(Params(5, 0, 5), limits_, *executor_).status(),
              absl::StatusCode::kInvalidArgument, "params.n");
  EXPECT_TRUE(ValidateParams(Params(5, 5, 0), limits_, *executor_).ok())
      << "K = 0 is a valid GEMM: C = beta * C";
}

// Issue 11, defect 1: with --max-dim 4294967295, m = n = k = 2^31 made
// A+B+C wrap to 0 bytes modulo 2^64 and the job was accepted with a 0-byte C.
TEST_F(ValidationTest, SizesThatWouldWrapAreOverTheJobLimit) {
  limits_.max_dim = 0xffffffffu;
  for (const auto& [m, n, k] :
       {std::tuple<uint32_t, uint32_t, uint32_t>{1u << 31, 1u << 31, 1u << 31},
        {1u << 30, 1u << 31, 1u << 31},
        {0xffffffffu, 0xffffffffu, 0xffffffffu}}) {
    ExpectError(ValidateParams(Params(m, n, k), limits_, *executor_).status(),
                absl::StatusCode::kResourceExhausted, "2^64 bytes or more");
  }
}

// Found by validation_fuzzer: with max_job_bytes at its largest (2^64 - 1),
// a size that saturated at 2^64 - 1 passed the limit and the job was
// accepted. Whatever the limits, such a job is refused.
TEST_F(ValidationTest, SizesPast64BitsAreRefusedWhateverTheLimits) {
  limits_.max_dim = 0xffffffffu;
  limits_.max_job_bytes = ~uint64_t{0};
  limits_.max_inflight_bytes = ~uint64_t{0};
  const absl::Status s =
      ValidateParams(Params(1u << 31, 1u << 31, 1u << 31), limits_, *executor_)
          .status();
  ExpectError(s, absl::StatusCode::kResourceExhausted, "params");
  EXPECT_NE(s.message().find("2^64"), absl::string_view::npos) << s;
}

// Issue 11, defect 4: a 100,000-character kernel name was echoed whole into
// the status message, past the client's metadata limit.
TEST_F(ValidationTest, QuotesAnUnknownKernelNameTruncated) {
  v1::GemmParams p = Params(2, 2, 2);
  p.set_kernel(std::string(100000, 'x'));
  const absl::Status s = ValidateParams(p, limits_, *executor_).status();
  ExpectError(s, absl::StatusCode::kInvalidArgument, "params.kernel");
  EXPECT_LT(s.message().size(), 300u) << s.message().substr(0, 400);
  EXPECT_NE(s.message().find("100000 bytes"), absl::string_view::npos)
      << s.message();
}

TEST_F(ValidationTest, LimitsGiveResourceExhausted) {
  limits_.max_dim = 100;
  ExpectError(ValidateParams(Params(5, 5, 101), limits_, *executor_).status(),
              absl::StatusCode::kResourceExhausted, "params.k");
  limits_.max_dim = 100000;
  limits_.max_job_bytes = 1000;
  ExpectError(ValidateParams(Params(10, 10, 10), limits_, *executor_).status(),
              absl::StatusCode::kResourceExhausted, "max_job_bytes");
}

TEST_F(ValidationTest, TheCheckFollowsTheJobThenTheServerDefault) {
  limits_.check_min_flops = 2.0 * 64 * 64 * 64;
  struct Case {
    uint32_t size;
    v1::Check check;
    bool checked;
  };
  for (const Case& c :
       {Case{64, v1::CHECK_DEFAULT, true}, Case{63, v1::CHECK_DEFAULT, false},
        Case{64, v1::CHECK_OFF, false}, Case{8, v1::CHECK_ABFT, true}}) {
    v1::GemmParams p = Params(c.size, c.size, c.size);
    p.set_check(c.check);
    auto spec = ValidateParams(p, limits_, *executor_);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->check, c.checked) << c.size << " " << c.check;
  }
  // K = 0 multiplies nothing: never checked.
  v1::GemmParams scale = Params(64, 64, 0);
  scale.set_check(v1::CHECK_ABFT);
  EXPECT_FALSE(ValidateParams(scale, limits_, *executor_)->check);
  // No server default: only jobs that ask.
  limits_.check_min_flops = 0;
  EXPECT_FALSE(
      ValidateParams(Params(4096, 4096, 4096), limits_, *executor_)->check);
}

// Float32 unless asked otherwise; the CPU backend serves the float32
// modes and says plainly that it has no TF32 or BF16.
TEST_F(ValidationTest, PrecisionIsTheCallersChoice) {
  for (v1::Precision precision :
       {v1::PRECISION_DEFAULT, v1::PRECISION_FP32, v1::PRECISION_FP32_TENSOR}) {
    v1::GemmParams p = Params(4, 4, 4);
    p.set_precision(precision);
    auto spec = ValidateParams(p, limits_, *executor_);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->kernel.name(), "cpu");
  }
  for (v1::Precision precision : {v1::PRECISION_TF32, v1::PRECISION_BF16}) {
    v1::GemmParams p = Params(4, 4, 4);
    p.set_precision(precision);
    ExpectError(ValidateParams(p, limits_, *executor_).status(),
                absl::StatusCode::kUnimplemented, "params.precision");
  }
  v1::GemmParams unknown = Params(4, 4, 4);
  unknown.set_precision(static_cast<v1::Precision>(9));
  ExpectError(ValidateParams(unknown, limits_, *executor_).status(),
              absl::StatusCode::kInvalidArgument, "params.precision");
}

TEST_F(ValidationTest, AnUnknownCheckIsInvalidArgument) {
  v1::GemmParams p = Params(4, 4, 4);
  p.set_check(static_cast<v1::Check>(7));
  ExpectError(ValidateParams(p, limits_, *executor_).status(),
              absl::StatusCode::kInvalidArgument, "params.check");
}

TEST_F(ValidationTest, UnknownKernelIsInvalidArgument) {
  v1::GemmParams p = Params(2, 2, 2);
  p.set_kernel("v42");
  ExpectError(ValidateParams(p, limits_, *executor_).status(),
              absl::StatusCode::kInvalidArgument, "params.kernel");
}

TEST_F(ValidationTest, OperandBytesMustMatchTheShape) {
  GemmProblem problem{3, 4, 5};
  EXPECT_TRUE(CheckOperandBytes(problem, 60, 80, 0).ok());
  EXPECT_TRUE(CheckOperandBytes(problem, 60, 80, 48).ok());
  ExpectError(CheckOperandBytes(problem, 59, 80, 0),
              absl::StatusCode::kInvalidArgument, "a: expected 60 bytes");
  ExpectError(CheckOperandBytes(problem, 60, 81, 0),
              absl::StatusCode::kInvalidArgument, "b: expected 80 bytes");
  ExpectError(CheckOperandBytes(problem, 60, 80, 47),
              absl::StatusCode::kInvalidArgument, "c: expected 48 bytes");
  problem.beta = 1.0f;
  ExpectError(CheckOperandBytes(problem, 60, 80, 0),
              absl::StatusCode::kInvalidArgument, "c: missing");
}

}  // namespace
}  // namespace gemm::server
