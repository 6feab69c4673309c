// End-to-end tests: a real gemm-server process on a loopback port, driven
// through libgemm_client and the raw gRPC stub. Every result is compared
// with a float64 reference (relative Frobenius error <= 1e-5). Here the CPU
// backend, odd shapes, chunked, split and pipelined jobs; beside it
// integration_test_errors.cc (status codes), _limits (queue and size
// limits), _shutdown (SIGTERM, drain, health) and _transport (gRPC's
// transport settings).
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "client/lib/gemm_client.h"
#include "gtest/gtest.h"
#include "proto/gemm.grpc.pb.h"
#include "tests/integration_fixture.h"
#include "tests/server_process.h"
#include "tests/test_job.h"

namespace gemm {
namespace {

using client::GemmClient;
using testing::Connect;
using testing::IntegrationTest;
using testing::kTolerance;
using testing::TestJob;

// The CPU backend computes in float32: it serves the float32 modes, says
// so in Info and in each timing, and refuses TF32 and BF16 by name.
TEST_F(IntegrationTest, TheCpuBackendComputesInFp32Only) {
  auto client = Connect(*server_);
  auto info = client->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_GE(info->kernel_details_size(), 1);
  EXPECT_EQ(info->kernel_details(0).name(), "cpu");
  EXPECT_EQ(info->kernel_details(0).precision(), "fp32");
  EXPECT_FALSE(info->kernel_details(0).description().empty());
  for (v1::Precision precision :
       {v1::PRECISION_DEFAULT, v1::PRECISION_FP32_TENSOR}) {
    TestJob job(33, 44, 55);
    job.args.precision = precision;
    auto timing = client->Gemm(job.args, job.out.data());
    ASSERT_TRUE(timing.ok()) << timing.status();
    EXPECT_EQ(timing->precision(), "fp32");
    EXPECT_LE(job.Error(), kTolerance);
  }
  for (v1::Precision precision : {v1::PRECISION_TF32, v1::PRECISION_BF16}) {
    TestJob job(33, 44, 55);
    job.args.precision = precision;
    auto timing = client->Gemm(job.args, job.out.data());
    EXPECT_EQ(timing.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(timing.status().message().find("params.precision"),
              std::string::npos)
        << timing.status();
  }
}

TEST_F(IntegrationTest, InfoDescribesTheCpuBackend) {
  auto client = Connect(*server_);
  auto info = client->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->backend(), "cpu");
  EXPECT_FALSE(info->version().empty());
  ASSERT_GE(info->devices_size(), 1);
  EXPECT_EQ(info->devices(0).id(), "cpu");
  EXPECT_EQ(info->kernels(0), "cpu");
  EXPECT_EQ(info->limits().max_dim(), 65536u);
  EXPECT_EQ(info->batching().max_batch_size(), 16u);
  EXPECT_GT(info->stats().uptime_s(), 0);
  // A rejected and a completed job show in the counters.
  const auto before = info->stats();
  TestJob bad(4, 4, 4);
  bad.args.kernel = "no-such-kernel";
  EXPECT_FALSE(client->Gemm(bad.args, bad.out.data()).ok());
  TestJob good(4, 4, 4);
  EXPECT_TRUE(client->Gemm(good.args, good.out.data()).ok());
  auto after = client->Info();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->stats().jobs_rejected(), before.jobs_rejected() + 1);
  EXPECT_EQ(after->stats().jobs_ok(), before.jobs_ok() + 1);
}

struct ShapeCase {
  uint32_t m, n, k;
  bool ta, tb;
  float alpha, beta;
};

class OddShapes : public IntegrationTest,
                  public ::testing::WithParamInterface<ShapeCase> {};

TEST_P(OddShapes, UnaryAndStreamMatchTheReference) {
  const ShapeCase p = GetParam();
  for (uint64_t max_unary : {uint64_t{1} << 40, uint64_t{0}}) {
    SCOPED_TRACE(max_unary == 0 ? "stream" : "unary");
    auto client = Connect(*server_, max_unary);
    TestJob job(p.m, p.n, p.k, p.ta, p.tb, p.alpha, p.beta, p.m + p.n);
    auto timing = client->Gemm(job.args, job.out.data());
    ASSERT_TRUE(timing.ok()) << timing.status();
    EXPECT_LE(job.Error(), kTolerance);
    EXPECT_EQ(timing->kernel(), "cpu");
    EXPECT_EQ(timing->device(), "cpu");
    EXPECT_GE(timing->server_ms(), timing->compute_ms());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, OddShapes,
    ::testing::Values(ShapeCase{1, 1, 1, false, false, 1, 0},
                      ShapeCase{1000, 999, 777, false, false, 1, 0},
                      ShapeCase{67, 45, 33, true, false, 1.5f, 0.25f},
                      ShapeCase{67, 45, 33, false, true, -1, 2},
                      ShapeCase{67, 45, 33, true, true, 0.5f, -1},
                      ShapeCase{13, 300, 1, false, false, 1, 1},
                      ShapeCase{9, 7, 0, false, false, 1, 3}));

TEST_F(IntegrationTest, JobsOver4MiBGoInChunks) {
  // 1100x1000x900: 4.0 MB of A alone, 12.4 MB in all, in 256 KiB chunks.
  GemmClient::Options options;
  options.target = server_->address();
  options.chunk_bytes = 256 << 10;
  auto client = GemmClient::Create(options);
  ASSERT_TRUE(client.ok());
  TestJob job(1100, 1000, 900, false, true, 1.0f, 0.5f, 3);
  auto timing = (*client)->Gemm(job.args, job.out.data());
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_LE(job.Error(), kTolerance);
}

TEST_F(IntegrationTest, SplitJobsMatchTheReferenceAndFailAsOne) {
  // Three row blocks over two connections: parts share channels, rows do
  // not divide evenly, C comes in with beta and goes out in pieces.
  GemmClient::Options options;
  options.target = server_->address();
  options.connections_per_target = 2;
  options.split_rows = 3;
  options.split_min_bytes = 1;
  auto client = GemmClient::Create(options);
  ASSERT_TRUE(client.ok());
  TestJob job(301, 77, 129, false, true, 0.75f, -1.25f, 8);
  EXPECT_TRUE((*client)->WouldSplit(job.args));
  auto timing = (*client)->Gemm(job.args, job.out.data());
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_LE(job.Error(), kTolerance);
  EXPECT_GT(timing->server_ms(), 0);
  // Large parts go over streams (above max_unary_bytes), small ones unary.
  GemmClient::Options streamed = options;
  streamed.max_unary_bytes = 1000;
  auto client2 = GemmClient::Create(streamed);
  ASSERT_TRUE(client2.ok());
  TestJob big(400, 300, 200, false, false, 1.0f, 0.0f, 9);
  ASSERT_TRUE((*client2)->Gemm(big.args, big.out.data()).ok());
  EXPECT_LE(big.Error(), kTolerance);
  // A transposed A is not split (its rows are not contiguous) but works.
  TestJob transposed(50, 40, 30, true, false, 1.0f, 0.0f, 10);
  EXPECT_FALSE((*client)->WouldSplit(transposed.args));
  ASSERT_TRUE((*client)->Gemm(transposed.args, transposed.out.data()).ok());
  EXPECT_LE(transposed.Error(), kTolerance);
  // One failing part fails the job, with the part's status.
  TestJob broken(90, 20, 10, false, false, 1.0f, 0.0f, 11, "broken");
  auto failed = (*client)->Gemm(broken.args, broken.out.data());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal)
      << failed.status();
}

TEST_F(IntegrationTest, AStreamPipelinesManyJobsAndTheyAllArrive) {
  auto client = Connect(*server_);
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 24; ++i) {
    jobs.push_back(std::make_unique<TestJob>(
        (i % 3 == 0) ? 64 : 33 + i, 40 + i, 17 + 2 * i, i % 2 == 1, i % 4 == 1,
        1.0f, (i % 5 == 0) ? 0.5f : 0.0f, 1000 + i));
  }
  std::atomic<int> ok{0};
  std::vector<absl::Status> statuses(jobs.size());
  auto stream = client->OpenStream();
  for (size_t i = 0; i < jobs.size(); ++i) {
    stream->Submit(jobs[i]->args, jobs[i]->out.data(),
                   [&, i](absl::StatusOr<v1::Timing> t) {
                     statuses[i] = t.status();
                     if (t.ok()) ++ok;
                   });
  }
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(ok, 24);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i];
    EXPECT_LE(jobs[i]->Error(), kTolerance) << "job " << i;
  }
}

TEST_F(IntegrationTest, WholeJobMessagesAndInlineResultsGiveTheSameAnswers) {
  // The client's one-message jobs and results (StreamRequest.job and
  // JobEnd.c), mixed with chunked ones on the same stream.
  GemmClient::Options options;
  options.target = server_->address();
  options.whole_job_max_bytes = 64 << 10;
  options.inline_result_max_bytes = 16 << 10;
  options.chunk_bytes = 8 << 10;
  auto client = GemmClient::Create(options);
  ASSERT_TRUE(client.ok());
  std::vector<std::unique_ptr<TestJob>> jobs;
  // Small (one message each way), result too big to inline, job too big
  // for one message; with and without C.
  jobs.push_back(
      std::make_unique<TestJob>(20, 30, 40, false, true, 1, 0.5f, 1));
  jobs.push_back(std::make_unique<TestJob>(90, 80, 10, true, false, 2, 0, 2));
  jobs.push_back(
      std::make_unique<TestJob>(120, 110, 100, false, false, 1, -1, 3));
  jobs.push_back(std::make_unique<TestJob>(1, 1, 1, false, false, 1, 0, 4));
  std::vector<absl::Status> statuses(jobs.size());
  auto stream = (*client)->OpenStream();
  for (size_t i = 0; i < jobs.size(); ++i) {
    stream->Submit(
        jobs[i]->args, jobs[i]->out.data(),
        [&, i](absl::StatusOr<v1::Timing> t) { statuses[i] = t.status(); });
  }
  ASSERT_TRUE(stream->Finish().ok());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i];
    EXPECT_LE(jobs[i]->Error(), kTolerance) << "job " << i;
  }
}

}  // namespace
}  // namespace gemm
