// The result check (ABFT, GemmParams.check) end to end, on a real server
// process on a loopback port (the CPU backend): checked jobs say so in their
// timing; the server's --check-min-gflop default and the per-job opt-in and
// opt-out; and silent corruption, injected by gemm-server-with-faults
// between a job's GEMM and its check (an exponent bit of one element
// flipped). A result corrupted on its first run is re-run, never returned;
// one corrupted on every run fails with DATA_LOSS; the mismatches show in
// Info. The same corruption without the check reaches the caller, which is
// what the check is for. On the unary call and on the stream.
//
// Built as gpu_result_check_test, the same tests run against --backend cuda
// (the check on the device, the corruption flipped in device memory), plus
// every kernel checked on odd shapes, transposes, beta and batches; they
// skip where there is no GPU. Outside Bazel:
// GEMM_SERVER_WITH_FAULTS_BINARY=path/to/gemm-server-with-faults.
#include <signal.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "client/lib/gemm_client.h"
#include "client/lib/shm_region.h"
#include "common/precision.h"
#include "gtest/gtest.h"
#include "tests/server_process.h"
#include "tests/test_job.h"
#ifdef GEMM_RESULT_CHECK_ON_GPU
#include "kernels/cuda_presence.h"
#endif

namespace gemm {
namespace {

using client::GemmClient;
using testing::ServerProcess;
using testing::TestJob;

// Jobs with these many rows get a bit flipped: on the first run only, and
// on every run.
constexpr uint32_t kFlipFirstRunM = 37;
constexpr uint32_t kFlipEveryRunM = 41;
// And the lowest mantissa bit, on the first run.
constexpr uint32_t kFlipLowestBitM = 43;

class ResultCheckTest : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() {
    std::vector<std::string> flags = {"--check-min-gflop",
                                      "0.001",
                                      "--testing-flip-m",
                                      std::to_string(kFlipFirstRunM),
                                      "--testing-flip-always-m",
                                      std::to_string(kFlipEveryRunM),
                                      "--testing-flip-lowest-bit-m",
                                      std::to_string(kFlipLowestBitM)};
#ifdef GEMM_RESULT_CHECK_ON_GPU
    const absl::StatusOr<kernels::CudaPresence> gpu =
        kernels::ProbeCudaDevices();
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    if (!gpu->present) {
      no_gpu_ = gpu->why_absent;
      return;
    }
    flags.insert(flags.end(), {"--backend", "cuda"});
#endif
    server_ = new ServerProcess(flags, ServerProcess::kServerWithFaults);
    ASSERT_TRUE(server_->Start().ok()) << server_->Log();
  }
  static void TearDownTestSuite() {
    if (server_ == nullptr) return;
    EXPECT_EQ(server_->Stop(SIGTERM), 0);
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (!no_gpu_.empty()) GTEST_SKIP() << no_gpu_;
  }

  // Unary calls (GetParam() false) or one stream per job (true).
  std::unique_ptr<GemmClient> Connect() {
    GemmClient::Options options;
    options.target = server_->address();
    options.max_unary_bytes = GetParam() ? 1 : 64 << 20;
    auto client = GemmClient::Create(options);
    EXPECT_TRUE(client.ok());
    return std::move(*client);
  }
  uint64_t Mismatches(GemmClient& client) {
    auto info = client.Info();
    EXPECT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->stats().check_mismatches(),
              info->devices(0).check_mismatches());
    return info->stats().check_mismatches();
  }

  static ServerProcess* server_;
  static std::string no_gpu_;
};
ServerProcess* ResultCheckTest::server_ = nullptr;
std::string ResultCheckTest::no_gpu_;

TEST_P(ResultCheckTest, ACheckedJobSaysSoInItsTiming) {
  auto client = Connect();
  int seed = 1;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, -0.75f}) {
        TestJob job(129, 65, 77, ta, tb, 1.5f, beta, ++seed);
        job.args.check = v1::CHECK_ABFT;
        auto timing = client->Gemm(job.args, job.out.data());
        ASSERT_TRUE(timing.ok()) << timing.status();
        EXPECT_LE(job.Error(), 1e-5);
        const v1::CheckRecord& check = timing->check();
        EXPECT_TRUE(check.ran());
        EXPECT_GT(check.ms(), 0);
        EXPECT_EQ(check.mismatches(), 0u);
        EXPECT_LE(check.worst_ratio(), 1.0);
        EXPECT_GT(check.worst_ratio(), 0.0);
        EXPECT_EQ(check.unchecked_lines(), 0u);
        EXPECT_TRUE(check.detail().empty()) << check.detail();
      }
    }
  }
}

TEST_P(ResultCheckTest, TheServerDefaultChecksLargeJobsUnlessTheyOptOut) {
  auto client = Connect();
  struct Case {
    uint32_t n;
    v1::Check check;
    bool ran;
  };
  // --check-min-gflop 0.001: 100^3 (0.002 GFLOP) is checked, 20^3 is not.
  for (const Case& c :
       {Case{100, v1::CHECK_DEFAULT, true}, Case{20, v1::CHECK_DEFAULT, false},
        Case{100, v1::CHECK_OFF, false}, Case{20, v1::CHECK_ABFT, true}}) {
    TestJob job(c.n, c.n, c.n, false, false, 1.0f, 0.0f, c.n);
    job.args.check = c.check;
    auto timing = client->Gemm(job.args, job.out.data());
    ASSERT_TRUE(timing.ok()) << timing.status();
    EXPECT_LE(job.Error(), 1e-5);
    EXPECT_EQ(timing->check().ran(), c.ran) << c.n << " " << c.check;
  }
  // K = 0 multiplies nothing and is never checked.
  TestJob scale(50, 40, 0, false, false, 1.0f, 2.0f, 3);
  scale.args.check = v1::CHECK_ABFT;
  auto timing = client->Gemm(scale.args, scale.out.data());
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_FALSE(timing->check().ran());
}

TEST_P(ResultCheckTest, AResultCorruptedOnceIsReRunNotReturned) {
  auto client = Connect();
  const uint64_t before = Mismatches(*client);
  // beta != 0: the re-run must start from the input C, not the bad result.
  TestJob job(kFlipFirstRunM, 53, 61, false, true, 1.0f, 0.5f, 11);
  job.args.check = v1::CHECK_ABFT;
  auto timing = client->Gemm(job.args, job.out.data());
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_LE(job.Error(), 1e-5);
  const v1::CheckRecord& check = timing->check();
  EXPECT_TRUE(check.ran());
  EXPECT_EQ(check.mismatches(), 1u);
  EXPECT_LE(check.worst_ratio(), 1.0);
  EXPECT_NE(check.detail().find("failed its check"), std::string::npos)
      << check.detail();
  EXPECT_NE(check.detail().find("re-run"), std::string::npos) << check.detail();
  EXPECT_EQ(Mismatches(*client), before + 1);
}

TEST_P(ResultCheckTest, AResultCorruptedOnEveryRunFailsWithDataLoss) {
  auto client = Connect();
  const uint64_t before = Mismatches(*client);
  TestJob job(kFlipEveryRunM, 30, 20, true, false, 1.0f, 0.0f, 12);
  job.args.check = v1::CHECK_ABFT;
  auto timing = client->Gemm(job.args, job.out.data());
  EXPECT_EQ(timing.status().code(), absl::StatusCode::kDataLoss)
      << timing.status();
  EXPECT_NE(timing.status().message().find("failed its check twice"),
            std::string::npos)
      << timing.status();
  EXPECT_EQ(Mismatches(*client), before + 2);
  // The server goes on serving.
  TestJob next(40, 30, 20, false, false, 1.0f, 0.0f, 13);
  next.args.check = v1::CHECK_ABFT;
  auto ok = client->Gemm(next.args, next.out.data());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_LE(next.Error(), 1e-5);
}

// A checked result bound for a region reaches it only once it passed: a
// job corrupted on every run leaves the region as it was (its input C
// included, updated in place), and one corrupted once leaves the re-run's
// right result there. (Before the fix the CPU backend computed in the
// region, and the second bad result stayed there.)
TEST_P(ResultCheckTest, ARegionSeesOnlyAResultThatPassed) {
  auto client = Connect();
  using client::SharedMemoryRegion;
  const std::string name = GetParam() ? "check-stream" : "check-unary";
  auto shm =
      SharedMemoryRegion::Create(SharedMemoryRegion::UniqueKey(name), 1 << 16);
  ASSERT_TRUE(shm.ok()) << shm.status();
  ASSERT_TRUE(client->RegisterRegion((*shm)->Describe(name)).ok());
  float* const region = (*shm)->floats();
  for (const bool in_place : {false, true}) {
    TestJob bad(kFlipEveryRunM, 30, 20, false, false, 1.0f,
                in_place ? 0.5f : 0.0f, 16);
    const uint64_t elements = bad.out.size();
    std::fill_n(region, elements, 7.0f);
    bad.args.check = v1::CHECK_ABFT;
    bad.args.result_region = {name, 0};
    if (in_place) {
      // C's input in the region, updated in place.
      std::copy(bad.c.begin(), bad.c.end(), region);
      bad.args.c = nullptr;
      bad.args.c_region = {name, 0};
    }
    auto failed = client->Gemm(bad.args, nullptr);
    EXPECT_EQ(failed.status().code(), absl::StatusCode::kDataLoss)
        << failed.status();
    for (uint64_t e = 0; e < elements; ++e) {
      ASSERT_EQ(region[e], in_place ? bad.c[e] : 7.0f)
          << "element " << e << (in_place ? " (in place)" : "");
    }
  }
  TestJob once(kFlipFirstRunM, 53, 61, false, false, 1.0f, 0.0f, 17);
  std::fill_n(region, once.out.size(), 7.0f);
  once.args.check = v1::CHECK_ABFT;
  once.args.result_region = {name, 0};
  auto timing = client->Gemm(once.args, nullptr);
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_EQ(timing->check().mismatches(), 1u);
  std::copy_n(region, once.out.size(), once.out.begin());
  EXPECT_LE(once.Error(), 1e-5);
  EXPECT_TRUE(client->UnregisterRegion(name).ok());
}

// Every kernel of the server, checked: odd shapes, every transpose, beta,
// and batches (jobs of one shape sent together share a launch).
TEST_P(ResultCheckTest, EveryKernelPassesItsCheck) {
  auto client = Connect();
  auto info = client->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  int seed = 100;
  for (const v1::KernelInfo& details : info->kernel_details()) {
    const std::string& kernel = details.name();
    // Each kernel in its own arithmetic, checked with its tolerance.
    const v1::Precision precision =
        details.precision() == "tf32"          ? v1::PRECISION_TF32
        : details.precision() == "bf16"        ? v1::PRECISION_BF16
        : details.precision() == "fp32-tensor" ? v1::PRECISION_FP32_TENSOR
                                               : v1::PRECISION_FP32;
    const double tolerance =
        VerifyTolerance(PrecisionNamed(details.precision()));
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const float beta = ta == tb ? 0.0f : 1.25f;
        std::vector<std::unique_ptr<TestJob>> jobs;
        std::vector<std::future<absl::StatusOr<v1::Timing>>> answers;
        for (int j = 0; j < 3; ++j) {
          jobs.push_back(std::make_unique<TestJob>(131, 67, 93, ta, tb, 0.75f,
                                                   beta, ++seed, kernel));
          jobs.back()->args.check = v1::CHECK_ABFT;
          jobs.back()->args.precision = precision;
          answers.push_back(
              client->GemmFuture(jobs.back()->args, jobs.back()->out.data()));
        }
        for (int j = 0; j < 3; ++j) {
          auto timing = answers[j].get();
          ASSERT_TRUE(timing.ok()) << kernel << ": " << timing.status();
          EXPECT_LE(jobs[j]->Error(), tolerance) << kernel;
          EXPECT_EQ(timing->kernel(), kernel);
          EXPECT_EQ(timing->precision(), details.precision());
          EXPECT_TRUE(timing->check().ran()) << kernel;
          EXPECT_EQ(timing->check().mismatches(), 0u) << kernel;
          EXPECT_LE(timing->check().worst_ratio(), 1.0) << kernel;
        }
      }
    }
  }
}

// The re-run is on another kernel: cuBLAS, or an own kernel after cuBLAS.
TEST_P(ResultCheckTest, TheReRunUsesAnotherKernel) {
  auto client = Connect();
  auto info = client->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  if (info->backend() != "cuda") GTEST_SKIP() << "one kernel on the CPU";
  for (const std::string kernel : {"v6", "cublas"}) {
    TestJob job(kFlipFirstRunM, 45, 70, true, true, 1.0f, 0.0f, 21, kernel);
    job.args.check = v1::CHECK_ABFT;
    auto timing = client->Gemm(job.args, job.out.data());
    ASSERT_TRUE(timing.ok()) << timing.status();
    EXPECT_LE(job.Error(), 1e-5);
    EXPECT_EQ(timing->check().mismatches(), 1u);
    EXPECT_NE(timing->kernel(), kernel);
    EXPECT_NE(timing->check().detail().find("re-run on " + timing->kernel()),
              std::string::npos)
        << timing->check().detail();
  }
}

// A flip of the lowest mantissa bit moves the result by less than float32
// rounding may: within the tolerance, so not a mismatch, and harmless.
TEST_P(ResultCheckTest, AFlipWithinTheToleranceIsNotAMismatch) {
  auto client = Connect();
  const uint64_t before = Mismatches(*client);
  TestJob job(kFlipLowestBitM, 53, 61, false, false, 1.0f, 0.0f, 15);
  job.args.check = v1::CHECK_ABFT;
  auto timing = client->Gemm(job.args, job.out.data());
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_EQ(timing->check().mismatches(), 0u);
  EXPECT_LE(timing->check().worst_ratio(), 1.0);
  EXPECT_LE(job.Error(), 1e-6);
  EXPECT_EQ(Mismatches(*client), before);
}

// Without the check, the same corruption reaches the caller.
TEST_P(ResultCheckTest, UncheckedCorruptionReachesTheCaller) {
  auto client = Connect();
  TestJob job(kFlipFirstRunM, 53, 61, false, false, 1.0f, 0.0f, 14);
  job.args.check = v1::CHECK_OFF;
  auto timing = client->Gemm(job.args, job.out.data());
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_FALSE(timing->check().ran());
  EXPECT_GT(job.Error(), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(UnaryAndStream, ResultCheckTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Stream" : "Unary";
                         });

}  // namespace
}  // namespace gemm
