// End-to-end tests (the suite: integration_test.cc): status codes. Malformed
// requests and stream parts, NaN and infinities, a failing device, job and
// call deadlines, each on a real gemm-server process.
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "client/lib/gemm_client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/gemm.grpc.pb.h"
#include "tests/integration_fixture.h"
#include "tests/test_job.h"

namespace gemm {
namespace {

using client::GemmClient;
using testing::CallRaw;
using testing::Connect;
using testing::ExpectStatus;
using testing::IntegrationTest;
using testing::kTolerance;
using testing::RawRequest;
using testing::TestJob;

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

}  // namespace
}  // namespace gemm
