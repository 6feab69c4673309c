// End-to-end tests: a real gemm-server process on a loopback port, driven
// through libgemm_client and the raw gRPC stub. Every result is compared
// with a float64 reference (relative Frobenius error <= 1e-5).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/gemm_client.h"
#include "common/reference_gemm.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/gemm.grpc.pb.h"
#include "server/blocking_generic_call.h"
#include "tests/health_check.h"
#include "tests/server_process.h"
#include "tests/test_job.h"

namespace gemm {
namespace {

using client::GemmArgs;
using client::GemmClient;
using testing::HealthCheck;
using testing::HealthRequest;
using testing::HealthStatus;
using testing::ServerProcess;
using testing::TestJob;

constexpr double kTolerance = 1e-5;

std::unique_ptr<GemmClient> Connect(const ServerProcess& server,
                                    uint64_t max_unary_bytes = 3 << 20) {
  GemmClient::Options options;
  options.target = server.address();
  options.max_unary_bytes = max_unary_bytes;
  auto client = GemmClient::Create(options);
  EXPECT_TRUE(client.ok());
  return std::move(*client);
}

class IntegrationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A test build of the server, in which kernel "broken" always fails.
    server_ = new ServerProcess({"--testing-fail-kernel", "broken"},
                                ServerProcess::kServerWithFaults);
    ASSERT_TRUE(server_->Start().ok());
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Stop(SIGTERM), 0);
    delete server_;
  }
  static ServerProcess* server_;
};
ServerProcess* IntegrationTest::server_ = nullptr;

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

// --- Status codes -------------------------------------------------------

v1::GemmRequest RawRequest(uint32_t m, uint32_t n, uint32_t k) {
  v1::GemmRequest request;
  request.mutable_params()->set_m(m);
  request.mutable_params()->set_n(n);
  request.mutable_params()->set_k(k);
  request.mutable_params()->set_alpha(1);
  std::vector<float> a(uint64_t{m} * k, 0.5f), b(uint64_t{k} * n, 0.25f);
  request.set_a(a.data(), 4 * a.size());
  request.set_b(b.data(), 4 * b.size());
  return request;
}

grpc::Status CallRaw(const ServerProcess& server,
                     const v1::GemmRequest& request,
                     v1::GemmResponse* response = nullptr) {
  auto stub = v1::GemmService::NewStub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::GemmResponse ignored;
  return stub->Gemm(&context, request, response ? response : &ignored);
}

void ExpectStatus(const grpc::Status& s, grpc::StatusCode code,
                  const std::string& fragment) {
  EXPECT_EQ(s.error_code(), code) << s.error_message();
  EXPECT_NE(s.error_message().find(fragment), std::string::npos)
      << "'" << s.error_message() << "' should mention '" << fragment << "'";
}

TEST_F(IntegrationTest, MalformedRequestsAreInvalidArgumentNamingTheField) {
  v1::GemmRequest request = RawRequest(4, 5, 6);
  request.mutable_a()->resize(4 * 4 * 6 - 4);
  ExpectStatus(CallRaw(*server_, request), grpc::INVALID_ARGUMENT,
               "a: expected 96 bytes");
  request = RawRequest(4, 5, 6);
  request.mutable_params()->set_beta(1);
  ExpectStatus(CallRaw(*server_, request), grpc::INVALID_ARGUMENT,
               "c: missing");
  request = RawRequest(4, 5, 6);
  request.mutable_params()->set_m(0);
  ExpectStatus(CallRaw(*server_, request), grpc::INVALID_ARGUMENT, "params.m");
  request = RawRequest(4, 5, 6);
  request.mutable_params()->set_kernel("v99");
  ExpectStatus(CallRaw(*server_, request), grpc::INVALID_ARGUMENT,
               "params.kernel");
  request.clear_params();
  ExpectStatus(CallRaw(*server_, request), grpc::INVALID_ARGUMENT,
               "params: missing");
  // And the server still serves.
  v1::GemmResponse response;
  ASSERT_TRUE(CallRaw(*server_, RawRequest(4, 5, 6), &response).ok());
  ASSERT_EQ(response.c().size(), 4u * 4 * 5);
  float c0;
  std::memcpy(&c0, response.c().data(), 4);
  EXPECT_FLOAT_EQ(c0, 6 * 0.5f * 0.25f);
}

TEST_F(IntegrationTest, BadStreamPartsFailOnlyTheirJob) {
  auto stub = v1::GemmService::NewStub(grpc::CreateChannel(
      server_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub->GemmStream(&context);
  std::vector<float> a(6, 1.0f), b(6, 2.0f);
  v1::StreamRequest req;
  // Job 1: a chunk at the wrong offset.
  req.set_job_id(1);
  req.mutable_params()->set_m(2);
  req.mutable_params()->set_n(2);
  req.mutable_params()->set_k(3);
  req.mutable_params()->set_alpha(1);
  req.set_operand(v1::OPERAND_A);
  req.set_offset(8);
  req.set_data(a.data(), 24);
  ASSERT_TRUE(stream->Write(req));
  // Job 1's later parts are ignored; its end comes once.
  req.Clear();
  req.set_job_id(1);
  req.set_end_of_job(true);
  ASSERT_TRUE(stream->Write(req));
  // Job 3: too few bytes of B at the end.
  req.Clear();
  req.set_job_id(3);
  *req.mutable_params() = RawRequest(2, 2, 3).params();
  req.set_operand(v1::OPERAND_A);
  req.set_data(a.data(), 24);
  ASSERT_TRUE(stream->Write(req));
  req.Clear();
  req.set_job_id(3);
  req.set_operand(v1::OPERAND_B);
  req.set_data(b.data(), 20);
  req.set_end_of_job(true);
  ASSERT_TRUE(stream->Write(req));
  // Job 4: valid, in one message.
  req.Clear();
  req.set_job_id(4);
  *req.mutable_params() = RawRequest(2, 2, 3).params();
  req.set_operand(v1::OPERAND_A);
  req.set_data(a.data(), 24);
  ASSERT_TRUE(stream->Write(req));
  req.Clear();
  req.set_job_id(4);
  req.set_operand(v1::OPERAND_B);
  req.set_data(b.data(), 24);
  req.set_end_of_job(true);
  ASSERT_TRUE(stream->Write(req));
  // Job 5: valid, the whole job in one message, the result inline in its
  // end record.
  req.Clear();
  req.set_job_id(5);
  *req.mutable_job() = RawRequest(2, 2, 3);
  req.mutable_job()->set_a(a.data(), 24);
  req.mutable_job()->set_b(b.data(), 24);
  req.mutable_job()->mutable_params()->set_inline_result_max_bytes(16);
  ASSERT_TRUE(stream->Write(req));
  // Job 6: a whole-job message that also carries data.
  req.set_job_id(6);
  req.set_operand(v1::OPERAND_A);
  req.set_data(a.data(), 24);
  ASSERT_TRUE(stream->Write(req));
  // Last, job 2: data for a job never started belongs to no job and breaks
  // the stream; every job before it still gets its one end.
  req.Clear();
  req.set_job_id(2);
  req.set_operand(v1::OPERAND_B);
  req.set_data(b.data(), 24);
  req.set_end_of_job(true);
  stream->Write(req);
  stream->WritesDone();

  std::map<uint64_t, v1::JobEnd> ends;
  std::string job4_c;
  v1::StreamResponse resp;
  while (stream->Read(&resp)) {
    if (resp.has_end()) {
      EXPECT_EQ(ends.count(resp.job_id()), 0u) << "one end per job";
      ends[resp.job_id()] = resp.end();
    } else if (resp.job_id() == 4) {
      job4_c += resp.chunk().data();
    }
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("job_id 2: no such job"),
            std::string::npos)
      << status.error_message();
  ASSERT_EQ(ends.size(), 5u);
  EXPECT_EQ(ends.count(2), 0u);
  EXPECT_EQ(ends[1].code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(ends[1].message().find("offset"), std::string::npos);
  EXPECT_EQ(ends[3].code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(ends[3].message().find("b: expected 24 bytes"), std::string::npos)
      << ends[3].message();
  EXPECT_EQ(ends[4].code(), 0) << ends[4].message();
  ASSERT_EQ(job4_c.size(), 16u);
  float c[4];
  std::memcpy(c, job4_c.data(), 16);
  for (float v : c) EXPECT_FLOAT_EQ(v, 6.0f);
  EXPECT_EQ(ends[5].code(), 0) << ends[5].message();
  ASSERT_EQ(ends[5].c().size(), 16u) << "result inside the end record";
  std::memcpy(c, ends[5].c().data(), 16);
  for (float v : c) EXPECT_FLOAT_EQ(v, 6.0f);
  EXPECT_EQ(ends[6].code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(ends[6].message().find("whole-job"), std::string::npos)
      << ends[6].message();
}

// proto/gemm.proto: NaN and infinities propagate as IEEE-754 says, except
// that with beta 0 the input C is not read.
TEST_F(IntegrationTest, NanAndInfinityPropagateButCIsNotReadWhenBetaIsZero) {
  auto stub = v1::GemmService::NewStub(grpc::CreateChannel(
      server_->address(), grpc::InsecureChannelCredentials()));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> a(6, 1.0f), b(6, 2.0f), c(4, nan);
  auto run = [&](float alpha, float beta) {
    v1::GemmRequest request = RawRequest(2, 2, 3);
    request.mutable_params()->set_alpha(alpha);
    request.mutable_params()->set_beta(beta);
    request.set_a(a.data(), 24);
    request.set_b(b.data(), 24);
    request.set_c(c.data(), 16);
    grpc::ClientContext context;
    v1::GemmResponse response;
    EXPECT_TRUE(stub->Gemm(&context, request, &response).ok());
    std::vector<float> out(4, -1.0f);
    EXPECT_EQ(response.c().size(), 16u);
    std::memcpy(out.data(), response.c().data(),
                std::min<size_t>(16, response.c().size()));
    return out;
  };
  for (float v : run(1.0f, 0.0f)) EXPECT_EQ(v, 6.0f) << "C (NaN) not read";
  for (float v : run(nan, 0.0f)) EXPECT_TRUE(std::isnan(v));
  for (float v : run(inf, 0.0f)) EXPECT_EQ(v, inf);
  for (float v : run(1.0f, 1.0f)) EXPECT_TRUE(std::isnan(v)) << "C is read";
  c.assign(4, 1.0f);
  for (float v : run(1.0f, -inf)) EXPECT_EQ(v, -inf);
}

TEST_F(IntegrationTest, DeviceFailureIsInternalAndTheServerGoesOn) {
  auto client = Connect(*server_);
  TestJob bad(8, 8, 8);
  bad.args.kernel = "broken";
  auto timing = client->Gemm(bad.args, bad.out.data());
  EXPECT_EQ(timing.status().code(), absl::StatusCode::kInternal);
  TestJob good(8, 8, 8);
  ASSERT_TRUE(client->Gemm(good.args, good.out.data()).ok());
  EXPECT_LE(good.Error(), kTolerance);
}

TEST_F(IntegrationTest, JobTimeoutWhileQueuedIsDeadlineExceeded) {
  // The second job waits behind the first, longer than its 1 ms budget
  // (on the CPU backend both are heavy, so the light worker takes neither:
  // a C over 1 MiB).
  auto client = Connect(*server_);
  TestJob slow(1200, 1200, 1200, false, false, 1, 0, 5);
  TestJob hurried(600, 600, 4);
  hurried.args.timeout_ms = 1;
  auto stream = client->OpenStream();
  absl::Status slow_status, hurried_status;
  stream->Submit(slow.args, slow.out.data(), [&](absl::StatusOr<v1::Timing> t) {
    slow_status = t.status();
  });
  stream->Submit(
      hurried.args, hurried.out.data(),
      [&](absl::StatusOr<v1::Timing> t) { hurried_status = t.status(); });
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_TRUE(slow_status.ok()) << slow_status;
  EXPECT_EQ(hurried_status.code(), absl::StatusCode::kDeadlineExceeded)
      << hurried_status;
}

TEST_F(IntegrationTest, CallDeadlineIsDeadlineExceeded) {
  GemmClient::Options options;
  options.target = server_->address();
  options.timeout = absl::Milliseconds(1);
  auto client = GemmClient::Create(options);
  ASSERT_TRUE(client.ok());
  TestJob job(1000, 1000, 1000);
  EXPECT_EQ((*client)->Gemm(job.args, job.out.data()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  // The server keeps serving.
  TestJob small(3, 3, 3);
  ASSERT_TRUE(Connect(*server_)->Gemm(small.args, small.out.data()).ok());
}

TEST(CoalesceTest, BufferHintedMessagesAllArriveAndAreRight) {
  // Both sides hold small messages back while more are queued: a burst of
  // small jobs on one stream (whole-job messages, inline results) and a
  // chunked one among them must all come back, and right.
  ServerProcess server({"--coalesce-small-writes", "true"});
  ASSERT_TRUE(server.Start().ok());
  GemmClient::Options options;
  options.target = server.address();
  options.coalesce_small_writes = true;
  options.chunk_bytes = 64 << 10;
  auto client = GemmClient::Create(options);
  ASSERT_TRUE(client.ok());
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 40; ++i) {
    jobs.push_back(std::make_unique<TestJob>(17 + i, 23, 9 + i % 5, false,
                                             false, 1.0f, 0.0f, 30 + i));
  }
  jobs.push_back(
      std::make_unique<TestJob>(700, 600, 500, false, false, 1.0f, 0.5f, 99));
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
    EXPECT_LE(jobs[i]->Error(), kTolerance) << i;
  }
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(LimitsTest, OversizedJobsAreResourceExhausted) {
  ServerProcess server({"--max-job-bytes", "100000", "--max-dim", "5000"});
  ASSERT_TRUE(server.Start().ok());
  ExpectStatus(CallRaw(server, RawRequest(100, 100, 100)),
               grpc::RESOURCE_EXHAUSTED, "max_job_bytes");
  ExpectStatus(CallRaw(server, RawRequest(1, 1, 6000)),
               grpc::RESOURCE_EXHAUSTED, "max_dim");
  EXPECT_TRUE(CallRaw(server, RawRequest(50, 50, 50)).ok());
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(LimitsTest, AJobRefusedMidUploadFailsAloneAndItsOperandsMayGo) {
  // The server refuses these jobs as soon as it reads their params, while
  // the client may still be sending their chunks; the rest is never sent,
  // and each callback poisons and frees the operands. Outgoing messages
  // hold copies, so that is safe whenever it happens (an ASan build,
  // --config=asan, would see a use after free otherwise).
  ServerProcess server({"--max-job-bytes", "1000000"});
  ASSERT_TRUE(server.Start().ok());
  GemmClient::Options options;
  options.target = server.address();
  // Large chunks: the refusal comes back while the next one is on its
  // way.
  options.chunk_bytes = 4 << 20;
  auto client = GemmClient::Create(options);
  ASSERT_TRUE(client.ok());
  auto stream = (*client)->OpenStream();
  constexpr uint32_t kDim = 1200;  // 17 MB per job
  constexpr int kJobs = 8;
  std::vector<float> out(uint64_t{kDim} * kDim);
  absl::Mutex mu;
  std::vector<absl::Status> statuses;
  for (int i = 0; i < kJobs; ++i) {
    auto* a = new std::vector<float>(uint64_t{kDim} * kDim);
    auto* b = new std::vector<float>(uint64_t{kDim} * kDim);
    FillRandom(a->data(), a->size(), 10 + i);
    FillRandom(b->data(), b->size(), 20 + i);
    GemmArgs args{
        .problem = {kDim, kDim, kDim}, .a = a->data(), .b = b->data()};
    stream->Submit(args, out.data(), [&, a, b](absl::StatusOr<v1::Timing> t) {
      std::fill(a->begin(), a->end(), -1.0f);
      std::fill(b->begin(), b->end(), -1.0f);
      delete a;
      delete b;
      absl::MutexLock lock(&mu);
      statuses.push_back(t.status());
    });
  }
  // The stream goes on: a small job after them is answered correctly.
  TestJob small(30, 20, 10, false, false, 1.0f, 0.0f, 5);
  absl::Notification small_done;
  absl::Status small_status;
  stream->Submit(small.args, small.out.data(),
                 [&](absl::StatusOr<v1::Timing> t) {
                   small_status = t.status();
                   small_done.Notify();
                 });
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_TRUE(small_done.HasBeenNotified());
  EXPECT_TRUE(small_status.ok()) << small_status;
  EXPECT_LE(small.Error(), kTolerance);
  ASSERT_EQ(statuses.size(), static_cast<size_t>(kJobs));
  for (const absl::Status& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_NE(s.message().find("max_job_bytes"), std::string::npos) << s;
  }
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// A server with room for one queued job, whose kernel "stuck" holds the
// single worker for 3 s (then fails with INTERNAL).
// One worker, no light one: the stuck job holds every job behind it.
ServerProcess ServerWithAStuckWorker() {
  return ServerProcess(
      {"--max-queued-jobs", "1", "--threads", "1", "--workers", "1",
       "--testing-stuck-kernel", "stuck", "--testing-stuck-s", "3"},
      ServerProcess::kServerWithFaults);
}

// A job for the stuck kernel, then six small ones.
std::vector<std::unique_ptr<TestJob>> StuckJobThenSmallOnes() {
  std::vector<std::unique_ptr<TestJob>> jobs;
  jobs.push_back(std::make_unique<TestJob>(8, 8, 8, false, false, 1, 0, 1));
  jobs.back()->args.kernel = "stuck";
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(
        std::make_unique<TestJob>(8, 8, 8, false, false, 1, 0, 2 + i));
  }
  return jobs;
}

// The CPU backend ran one job at a time: one client's long GEMM kept every
// other client's small jobs waiting for all of it. A light worker now takes
// the small ones (here while a heavy job is stuck for 3 s).
TEST(LimitsTest, SmallJobsDoNotWaitBehindALongOne) {
  ServerProcess server({"--threads", "1", "--testing-stuck-kernel", "stuck",
                        "--testing-stuck-s", "3"},
                       ServerProcess::kServerWithFaults);
  ASSERT_TRUE(server.Start().ok());
  auto heavy_client = Connect(server);
  TestJob heavy(640, 640, 640, false, false, 1, 0, 1);
  heavy.args.kernel = "stuck";
  absl::Notification heavy_done;
  absl::Status heavy_status;
  heavy_client->GemmAsync(heavy.args, heavy.out.data(),
                          [&](absl::StatusOr<v1::Timing> t) {
                            heavy_status = t.status();
                            heavy_done.Notify();
                          });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto client = Connect(server);
  for (int i = 0; i < 5; ++i) {
    TestJob small(37, 29, 41, i % 2 == 1, i % 3 == 1, 1.5f, 0.5f, 10 + i);
    const absl::StatusOr<v1::Timing> timing =
        client->Gemm(small.args, small.out.data());
    ASSERT_TRUE(timing.ok()) << timing.status();
    EXPECT_LE(small.Error(), kTolerance);
  }
  EXPECT_FALSE(heavy_done.HasBeenNotified())
      << "the small jobs waited for the stuck one";
  heavy_done.WaitForNotification();
  EXPECT_EQ(heavy_status.code(), absl::StatusCode::kInternal) << heavy_status;
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(LimitsTest, AFullQueueTurnsUnaryCallsAwayWithUnavailable) {
  ServerProcess server = ServerWithAStuckWorker();
  ASSERT_TRUE(server.Start().ok());
  auto client = Connect(server);
  std::vector<std::unique_ptr<TestJob>> jobs = StuckJobThenSmallOnes();
  absl::Mutex mu;
  std::vector<absl::Status> statuses(jobs.size());
  int done = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    client->GemmAsync(jobs[i]->args, jobs[i]->out.data(),
                      [&, i](absl::StatusOr<v1::Timing> t) {
                        absl::MutexLock lock(&mu);
                        statuses[i] = t.status();
                        ++done;
                      });
    // The worker takes the stuck job before the small ones come.
    if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* d) { return *d == 7; }, &done));
  }
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kInternal) << statuses[0];
  int ok = 0, unavailable = 0;
  for (size_t i = 1; i < jobs.size(); ++i) {
    if (statuses[i].ok()) {
      ++ok;
      EXPECT_LE(jobs[i]->Error(), kTolerance);
    } else {
      EXPECT_EQ(statuses[i].code(), absl::StatusCode::kUnavailable)
          << statuses[i];
      EXPECT_NE(statuses[i].message().find("queue full"), std::string::npos);
      ++unavailable;
    }
  }
  EXPECT_EQ(ok, 1) << "one small job fits the queue";
  EXPECT_EQ(unavailable, 5);
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// Issue 11, defect 6: on a stream the same jobs came back UNAVAILABLE; the
// server now stops reading the stream until the queue has room.
TEST(LimitsTest, AFullQueueSlowsAStreamDownAndEveryJobRuns) {
  ServerProcess server = ServerWithAStuckWorker();
  ASSERT_TRUE(server.Start().ok());
  auto client = Connect(server);
  std::vector<std::unique_ptr<TestJob>> jobs = StuckJobThenSmallOnes();
  std::vector<absl::Status> statuses(jobs.size());
  auto stream = client->OpenStream();
  for (size_t i = 0; i < jobs.size(); ++i) {
    stream->Submit(
        jobs[i]->args, jobs[i]->out.data(),
        [&, i](absl::StatusOr<v1::Timing> t) { statuses[i] = t.status(); });
  }
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kInternal) << statuses[0];
  for (size_t i = 1; i < jobs.size(); ++i) {
    EXPECT_TRUE(statuses[i].ok()) << "job " << i << ": " << statuses[i];
    EXPECT_LE(jobs[i]->Error(), kTolerance) << "job " << i;
  }
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(ShutdownTest, SigtermFinishesJobsInFlightThenExitsZero) {
  // A long batching delay holds accepted jobs in the queue, so they are
  // surely in flight when the signal comes; shutdown must still run them.
  ServerProcess server(
      {"--max-queue-delay-us", "20000000", "--max-batch-size", "64"});
  ASSERT_TRUE(server.Start().ok());
  auto client = Connect(server, uint64_t{1} << 40);  // all unary
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(
        std::make_unique<TestJob>(120, 130, 140, false, false, 1, 0, 10 + i));
  }
  absl::Mutex mu;
  std::vector<absl::Status> statuses(jobs.size());
  int done = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    client->GemmAsync(jobs[i]->args, jobs[i]->out.data(),
                      [&, i](absl::StatusOr<v1::Timing> t) {
                        absl::MutexLock lock(&mu);
                        statuses[i] = t.status();
                        ++done;
                      });
  }
  // Give the jobs time to arrive; none can finish before the 20 s delay.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  {
    absl::MutexLock lock(&mu);
    ASSERT_EQ(done, 0) << "jobs finished before the signal";
  }
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(15), 0) << "exits 0 long before the 20 s delay";
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* d) { return *d == 6; }, &done));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(statuses[i].ok()) << "job " << i << ": " << statuses[i];
    EXPECT_LE(jobs[i]->Error(), kTolerance) << "job " << i;
  }
  // Nothing listens any more.
  TestJob late(2, 2, 2);
  EXPECT_EQ(client->Gemm(late.args, late.out.data()).status().code(),
            absl::StatusCode::kUnavailable);
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

std::string LastLine(const std::string& log) {
  std::string trimmed = log;
  while (!trimmed.empty() && trimmed.back() == '\n') trimmed.pop_back();
  const size_t newline = trimmed.rfind('\n');
  return newline == std::string::npos ? trimmed : trimmed.substr(newline + 1);
}

// Issue 11, defect 7: after SIGTERM the port refused connections at once,
// so no health check ever saw NOT_SERVING.
TEST(ShutdownTest, HealthIsNotServingDuringTheDrainDelayWhileJobsStillRun) {
  ServerProcess server({"--drain-delay-s", "2", "--shutdown-grace-s", "10",
                        "--log-level", "info"});
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(HealthCheck(server.address()), 1) << "SERVING";
  auto client = Connect(server);
  server.Signal(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(HealthCheck(server.address()), 2) << "NOT_SERVING";
  TestJob job(33, 44, 55);
  absl::StatusOr<v1::Timing> t = client->Gemm(job.args, job.out.data());
  EXPECT_TRUE(t.ok()) << t.status();
  EXPECT_LE(job.Error(), kTolerance);
  EXPECT_EQ(server.Wait(15), 0);
  EXPECT_NE(LastLine(server.Log()).find("shut down cleanly"), std::string::npos)
      << server.Log();
}

// grpc.health.v1 is the server's own (server/health_service.h): Check
// knows the whole server ("") and gemm.v1.GemmService, and answers
// NOT_FOUND for another service; Watch sends SERVING, then NOT_SERVING as
// the drain begins, and ends when the server shuts down, which it does not
// hold.
TEST(ShutdownTest, HealthWatchSeesTheDrainAndEndsAtShutdown) {
  ServerProcess server({"--drain-delay-s", "1", "--shutdown-grace-s", "30",
                        "--log-level", "info"});
  ASSERT_TRUE(server.Start().ok());
  grpc::GenericStub stub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  for (const auto& [service, expected] :
       std::vector<std::pair<std::string, int>>{
           {"", 1}, {"gemm.v1.GemmService", 1}, {"no.Such", -5}}) {
    server::BlockingGenericCall check(&stub, "/grpc.health.v1.Health/Check",
                                      absl::Seconds(5));
    ASSERT_TRUE(check.Write(HealthRequest(service)));
    check.WritesDone();
    grpc::ByteBuffer response;
    const bool got = check.Read(&response);
    const grpc::Status status = check.Finish();
    EXPECT_EQ(got ? HealthStatus(response) : -status.error_code(), expected)
        << service << ": " << status.error_message();
  }
  server::BlockingGenericCall watch(&stub, "/grpc.health.v1.Health/Watch");
  ASSERT_TRUE(watch.Write(HealthRequest("")));
  watch.WritesDone();
  grpc::ByteBuffer response;
  ASSERT_TRUE(watch.Read(&response));
  EXPECT_EQ(HealthStatus(response), 1) << "SERVING";
  const auto start = std::chrono::steady_clock::now();
  server.Signal(SIGTERM);
  ASSERT_TRUE(watch.Read(&response));
  EXPECT_EQ(HealthStatus(response), 2) << "NOT_SERVING";
  EXPECT_FALSE(watch.Read(&response));
  EXPECT_EQ(watch.Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(server.Wait(15), 0);
  EXPECT_LT(SecondsSince(start), 10) << "the watch held the shutdown";
  EXPECT_NE(LastLine(server.Log()).find("shut down cleanly"), std::string::npos)
      << server.Log();
}

// Issue 11, defect 7: an open, idle GemmStream held shutdown for the whole
// grace period.
TEST(ShutdownTest, AnIdleStreamEndsAtOnce) {
  ServerProcess server({"--shutdown-grace-s", "30", "--log-level", "info"});
  ASSERT_TRUE(server.Start().ok());
  auto client = Connect(server);
  std::unique_ptr<client::JobStream> stream = client->OpenStream();
  TestJob job(20, 30, 40);
  absl::Notification done;
  stream->Submit(job.args, job.out.data(), [&](absl::StatusOr<v1::Timing> t) {
    EXPECT_TRUE(t.ok()) << t.status();
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_LE(job.Error(), kTolerance);
  // The stream stays open, idle.
  const auto start = std::chrono::steady_clock::now();
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(20), 0);
  EXPECT_LT(SecondsSince(start), 5.0) << "an idle stream held shutdown";
  EXPECT_NE(LastLine(server.Log()).find("shut down cleanly"), std::string::npos)
      << server.Log();
  EXPECT_EQ(stream->Finish().code(), absl::StatusCode::kUnavailable);
}

// Issue 11, defect 2: shutdown must end within the grace period plus a
// small bound whatever the calls are doing, here a job that never leaves
// the executor.
TEST(ShutdownTest, AJobStuckInTheExecutorCannotHoldShutdown) {
  ServerProcess server({"--testing-stuck-kernel", "stuck", "--shutdown-grace-s",
                        "1", "--log-level", "info"},
                       ServerProcess::kServerWithFaults);
  ASSERT_TRUE(server.Start().ok());
  auto client = Connect(server);
  TestJob job(8, 8, 8);
  job.args.kernel = "stuck";
  absl::Notification answered;
  client->GemmAsync(job.args, job.out.data(),
                    [&](absl::StatusOr<v1::Timing> t) {
                      EXPECT_FALSE(t.ok());
                      answered.Notify();
                    });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto start = std::chrono::steady_clock::now();
  server.Signal(SIGTERM);
  const int code = server.Wait(30);
  // Grace 1 s plus the 5 s bound, with room for a loaded machine.
  EXPECT_NE(code, -1) << "still running 30 s after SIGTERM";
  EXPECT_LT(SecondsSince(start), 9.0);
  EXPECT_EQ(code, 1) << "a forced exit is not a clean one";
  EXPECT_NE(LastLine(server.Log()).find("exiting without it"),
            std::string::npos)
      << server.Log();
  EXPECT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

// Issue 11, defect 2: with --max-dim 4294967295, a streamed job of
// 2^30 x 2^31 x 2^31 wedged its stream (no JobEnd for it or the next job).
TEST(ShutdownTest, AHugeStreamedJobGetsItsAnswerAndTheNextJobRuns) {
  ServerProcess server({"--max-dim", "4294967295", "--shutdown-grace-s", "5",
                        "--log-level", "debug"});
  // The call's context is gone before the signal: a client that keeps a
  // finished call's ClientContext keeps its HTTP/2 stream, and with it the
  // server's shutdown, waiting to the end of the grace period.
  ASSERT_TRUE(server.Start().ok());
  {
    auto stub = v1::GemmService::NewStub(grpc::CreateChannel(
        server.address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(20));
    auto stream = stub->GemmStream(&context);
    v1::StreamRequest req;
    req.set_job_id(1);
    req.mutable_params()->set_m(1u << 30);
    req.mutable_params()->set_n(2147483648u);
    req.mutable_params()->set_k(2147483648u);
    req.mutable_params()->set_alpha(1);
    req.set_end_of_job(true);
    ASSERT_TRUE(stream->Write(req));
    std::vector<float> a(6, 1.0f), b(6, 2.0f);
    req.Clear();
    req.set_job_id(2);
    *req.mutable_job() = RawRequest(2, 2, 3);
    req.mutable_job()->set_a(a.data(), 24);
    req.mutable_job()->set_b(b.data(), 24);
    req.mutable_job()->mutable_params()->set_inline_result_max_bytes(16);
    ASSERT_TRUE(stream->Write(req));
    stream->WritesDone();
    std::map<uint64_t, v1::JobEnd> ends;
    v1::StreamResponse resp;
    while (stream->Read(&resp)) {
      if (resp.has_end()) ends[resp.job_id()] = resp.end();
    }
    EXPECT_TRUE(stream->Finish().ok());
    ASSERT_EQ(ends.size(), 2u);
    EXPECT_EQ(ends[1].code(), grpc::RESOURCE_EXHAUSTED) << ends[1].message();
    EXPECT_EQ(ends[2].code(), 0) << ends[2].message();
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(server.Stop(SIGTERM), 0);
  EXPECT_LT(SecondsSince(start), 5.0);
}

// Issue 12: a server at its descriptor limit cannot accept; it now takes
// what the hard limit allows.
TEST(TransportTest, TheOpenFileLimitIsRaisedToTheHardLimit) {
  rlimit mine;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &mine), 0);
  if (mine.rlim_max <= 256) GTEST_SKIP() << "hard limit too low to lower";
  rlimit low = mine;
  low.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  ServerProcess server;
  const absl::Status started = server.Start();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &mine), 0);
  ASSERT_TRUE(started.ok()) << started;
  std::ifstream limits("/proc/" + std::to_string(server.pid()) + "/limits");
  std::string line, soft, hard;
  while (std::getline(limits, line)) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream fields(line.substr(std::strlen("Max open files")));
    fields >> soft >> hard;
  }
  EXPECT_EQ(soft, hard) << "soft limit raised to the hard one";
  EXPECT_NE(soft, "256");
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// The threads of `pid` named `name` (gRPC names its own).
int ThreadsNamed(pid_t pid, const std::string& name) {
  int count = 0;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) ++count;
  }
  return count;
}

// Issue 12: gRPC 1.51 serves every callback call on half as many threads as
// it counts cores (2 to 16), so a 2-core server had two, and one client's
// rapid reset held every other client's calls for seconds. gemm-server now
// has gRPC count at least 16 cores (--grpc-cores), never fewer than the
// host's.
TEST(TransportTest, GrpcServesCallsOnThreadsForAtLeastSixteenCores) {
  const long host = sysconf(_SC_NPROCESSORS_CONF);
  ASSERT_GT(host, 0);
  auto serving_threads = [](long cores) {
    return static_cast<int>(std::clamp(cores / 2, 2L, 16L));
  };
  struct Case {
    std::vector<std::string> flags;
    long cores;
  };
  for (const Case& c : {Case{{}, std::max(16L, host)},
                        Case{{"--grpc-cores", "24"}, std::max(24L, host)},
                        Case{{"--grpc-cores", "1"}, host}}) {
    std::vector<std::string> flags = c.flags;
    flags.insert(flags.end(), {"--log-level", "info"});
    ServerProcess server(flags);
    ASSERT_TRUE(server.Start().ok());
    // gRPC starts them with the server, before the port file is written.
    EXPECT_EQ(ThreadsNamed(server.pid(), "nexting_thread"),
              serving_threads(c.cores))
        << (c.flags.empty() ? "default" : c.flags.back());
    EXPECT_NE(server.Log().find("gRPC sized for " + std::to_string(c.cores) +
                                " cores"),
              std::string::npos)
        << server.Log();
    EXPECT_EQ(server.Stop(SIGTERM), 0);
  }
}

// Issue 12: one connection could hold any number of calls open.
TEST(TransportTest, CallsBeyondMaxConcurrentStreamsWaitForASlot) {
  ServerProcess server({"--max-concurrent-streams", "2"});
  ASSERT_TRUE(server.Start().ok());
  auto channel =
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  auto stub = v1::GemmService::NewStub(channel);
  auto unary = [&](int deadline_ms) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(deadline_ms));
    v1::GemmRequest request = RawRequest(2, 2, 3);
    std::vector<float> a(6, 1.0f), b(6, 2.0f);
    request.set_a(a.data(), 24);
    request.set_b(b.data(), 24);
    v1::GemmResponse response;
    return stub->Gemm(&context, request, &response).error_code();
  };
  ASSERT_EQ(unary(5000), grpc::OK);
  // Two streams, open and idle, take both slots.
  grpc::ClientContext first_context, second_context;
  auto first = stub->GemmStream(&first_context);
  auto second = stub->GemmStream(&second_context);
  // Make sure both streams have started on the server: a unary call now
  // waits for a slot.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(unary(1000), grpc::DEADLINE_EXCEEDED)
      << "a third call must wait while two streams are open";
  first->WritesDone();
  EXPECT_TRUE(first->Finish().ok());
  EXPECT_EQ(unary(5000), grpc::OK) << "a slot is free again";
  second->WritesDone();
  EXPECT_TRUE(second->Finish().ok());
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// Issue 12: idle connections were never closed.
TEST(TransportTest, AnIdleConnectionIsClosed) {
  ServerProcess server({"--max-connection-idle-s", "1"});
  ASSERT_TRUE(server.Start().ok());
  auto channel =
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  auto stub = v1::GemmService::NewStub(channel);
  grpc::ClientContext context;
  v1::InfoRequest request;
  v1::InfoResponse response;
  ASSERT_TRUE(stub->Info(&context, request, &response).ok());
  EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  // The server's GOAWAY after 1 s without calls sends the channel idle.
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (channel->GetState(false) == GRPC_CHANNEL_READY &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(channel->GetState(false), GRPC_CHANNEL_READY)
      << "still connected 10 s after 1 s of idleness";
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace gemm
