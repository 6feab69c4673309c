// Issue 12: one client cannot take the server down (the suite:
// hostile_client_test.cc). Here attacks on a client's share: jobs declared
// and never sent, unary requests waiting for their client's turn to be
// read, results far larger than their requests, jobs opened past the
// per-stream and per-client limits; each while a second client (from
// [::1]) must be served.
#include <signal.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "common/wait_until.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/gemm.grpc.pb.h"
#include "proto/wire_codec.h"
#include "server/testing/blocking_generic_call.h"
#include "tests/hostile/hostile_client.h"
#include "tests/metrics_scrape.h"
#include "tests/server_process.h"

namespace gemm {
namespace {

using server::BlockingGenericCall;
using testing::CallInfo;
using testing::Declare;
using testing::FreshTestFile;
using testing::MetricsEndpoint;
using testing::ReadEnds;
using testing::Request;
using testing::ServerProcess;
using testing::VictimJobs;
using testing::WaitForUnaryRequests;
using testing::WaitUntil;

// Seven params-only stream messages of under 30 bytes each once reserved
// all 8 GiB of the in-flight budget, and every other client's job got
// UNAVAILABLE for as long as the stream stayed open. Now a client holds at
// most its share (a quarter of the budget by default).
TEST(ClientShareTest, JobsDeclaredAndNeverSentLeaveOtherClientsServed) {
  const MetricsEndpoint metrics("declared-jobs");
  std::vector<std::string> flags = {"--listen", "[::]:0"};
  for (const std::string& flag : metrics.Flags()) flags.push_back(flag);
  ServerProcess server(flags);
  ASSERT_TRUE(server.Start().ok());
  auto stub = v1::GemmService::NewStub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub->GemmStream(&context);
  // Four 13000^3 jobs (2.03 GB each), one of 6310^3 and one of 108^3 leave
  // 1,424 bytes of the 8 GiB, less than a 64^3 job.
  uint64_t id = 0;
  for (uint32_t size : {13000, 13000, 13000, 13000, 6310, 108}) {
    ASSERT_TRUE(stream->Write(Declare(++id, size, size, size)));
  }
  // The victim comes once the declarations hold budget.
  EXPECT_TRUE(
      WaitUntil([&] { return metrics.Sample("gemm_inflight_bytes ") > 0; },
                absl::Seconds(10)))
      << metrics.Scrape();
  EXPECT_EQ(VictimJobs(server.address_v6(), 3), 3);
  context.TryCancel();
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// 120 unary calls that each announced a 64 MiB message and sent 60 MiB of it
// made gRPC hold 7.3 GB: it read every call's message as it came, and past
// its resource quota cancelled streams at random, another client's too
// (tests/attack, partial-unary). Now the service reads a client's unary
// requests --max-client-unary-reads at a time; its other calls wait
// unread, up to --max-client-jobs of them. A call that sends no message
// holds a turn the way an unfinished one does.
TEST(ClientShareTest, UnaryRequestsAreReadAFewAtATimePerClient) {
  const std::string port_file = FreshTestFile("unary-gate-metrics.port");
  ServerProcess server({"--listen", "[::]:0", "--max-client-unary-reads", "1",
                        "--max-client-jobs", "2", "--metrics-listen",
                        "127.0.0.1:0", "--metrics-port-file", port_file});
  ASSERT_TRUE(server.Start().ok());
  int metrics_port = 0;
  std::ifstream(port_file) >> metrics_port;
  ASSERT_GT(metrics_port, 0) << server.Log();
  auto wait_for = [&](double reading, double waiting) {
    return WaitForUnaryRequests(metrics_port, reading, waiting);
  };
  grpc::GenericStub stub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  const std::string kGemm = "/gemm.v1.GemmService/Gemm";
  // In this order on the server (the calls of a channel may reach it in
  // any order).
  BlockingGenericCall holding(&stub, kGemm);
  ASSERT_TRUE(wait_for(1, 0));
  BlockingGenericCall first(&stub, kGemm, absl::Seconds(20));
  ASSERT_TRUE(wait_for(1, 1));
  BlockingGenericCall second(&stub, kGemm);
  ASSERT_TRUE(wait_for(1, 2));
  // One reading and two waiting: a third call waiting is one too many.
  {
    BlockingGenericCall refused(&stub, kGemm, absl::Seconds(5));
    grpc::ByteBuffer unused;
    EXPECT_FALSE(refused.Read(&unused));
    const grpc::Status status = refused.Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(status.error_message().find("--max-client-jobs 2"),
              std::string::npos)
        << status.error_message();
  }
  // Another client is read and served meanwhile, one call at a time.
  EXPECT_EQ(VictimJobs(server.address_v6(), 5), 5);
  // A waiting call's request arrives, but is read only when the turn comes
  // to it: when the call holding it ends.
  ASSERT_TRUE(first.Write(wire::EncodeMessage(Request(64, 64, 64))));
  first.WritesDone();
  // Time for a read out of turn to show: the absence of an event cannot be
  // waited for.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(wait_for(1, 2)) << "first's request was read before its turn";
  holding.Cancel();
  second.Cancel();
  grpc::ByteBuffer response_bytes;
  ASSERT_TRUE(first.Read(&response_bytes));
  EXPECT_TRUE(first.Finish().ok());
  v1::GemmResponse response;
  ASSERT_TRUE(wire::DecodeMessage(response_bytes, &response).ok());
  EXPECT_EQ(response.c().size(), 64u * 64 * 4);
  // 64 * (0.5 * 0.25) = 8 in every element.
  float c00 = 0;
  memcpy(&c00, response.c().data(), 4);
  EXPECT_EQ(c00, 8.0f);
  EXPECT_EQ(holding.Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(second.Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// Unfinished 64 MiB requests to Info instead of Gemm (attack.py
// partial-unary with --set partial-unary.path=/gemm.v1.GemmService/Info)
// got 1 GB into gRPC's buffers on the 2-core machine, and the quota
// cancelled 33 of another client's 1,700 jobs: only Gemm's requests were
// read in their client's turn. Now every unary method's are, the health
// check's included.
TEST(ClientShareTest, EveryUnaryMethodIsReadInItsClientsTurn) {
  const std::string port_file = FreshTestFile("unary-methods-metrics.port");
  ServerProcess server({"--listen", "[::]:0", "--max-client-unary-reads", "1",
                        "--metrics-listen", "127.0.0.1:0",
                        "--metrics-port-file", port_file});
  ASSERT_TRUE(server.Start().ok());
  int metrics_port = 0;
  std::ifstream(port_file) >> metrics_port;
  ASSERT_GT(metrics_port, 0) << server.Log();
  grpc::GenericStub stub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  for (const std::string method :
       {"/gemm.v1.GemmService/Info", "/gemm.v1.GemmService/ListRegions",
        "/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch"}) {
    SCOPED_TRACE(method);
    // A call that sends nothing holds the client's one turn; the next one
    // waits for it.
    BlockingGenericCall holding(&stub, method);
    ASSERT_TRUE(WaitForUnaryRequests(metrics_port, 1, 0));
    BlockingGenericCall waiting(&stub, method);
    ASSERT_TRUE(WaitForUnaryRequests(metrics_port, 1, 1));
    holding.Cancel();
    waiting.Cancel();
    grpc::ByteBuffer unused;
    EXPECT_FALSE(holding.Read(&unused));
    EXPECT_FALSE(waiting.Read(&unused));
    EXPECT_EQ(holding.Finish().error_code(), grpc::StatusCode::CANCELLED);
    EXPECT_EQ(waiting.Finish().error_code(), grpc::StatusCode::CANCELLED);
    ASSERT_TRUE(WaitForUnaryRequests(metrics_port, 0, 0));
  }
  // Another client is served meanwhile, and this one afterwards.
  EXPECT_TRUE(CallInfo(server.address_v6()).ok());
  EXPECT_TRUE(CallInfo(server.address()).ok());
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// At shutdown, unary calls still waiting for their turn are not read: they
// end UNAVAILABLE at once, so that a client can go elsewhere.
TEST(ClientShareTest, UnaryCallsWaitingAtShutdownEndUnavailable) {
  const MetricsEndpoint metrics("unary-at-shutdown");
  std::vector<std::string> flags = {
      "--listen",           "[::]:0", "--max-client-unary-reads", "1",
      "--shutdown-grace-s", "3",      "--drain-delay-s",          "0"};
  for (const std::string& flag : metrics.Flags()) flags.push_back(flag);
  ServerProcess server(flags);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(metrics.port(), 0) << server.Log();
  grpc::GenericStub stub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  const std::string kGemm = "/gemm.v1.GemmService/Gemm";
  // In this order on the server: one holding the client's turn, one
  // waiting for it.
  BlockingGenericCall holding(&stub, kGemm);
  ASSERT_TRUE(WaitForUnaryRequests(metrics.port(), 1, 0));
  BlockingGenericCall waiting(&stub, kGemm, absl::Seconds(20));
  ASSERT_TRUE(WaitForUnaryRequests(metrics.port(), 1, 1));
  int exit_code = -1;
  std::thread stop([&] { exit_code = server.Stop(SIGTERM); });
  grpc::ByteBuffer unused;
  EXPECT_FALSE(waiting.Read(&unused));
  const grpc::Status status = waiting.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << status.error_message();
  EXPECT_NE(status.error_message().find("shutting down"), std::string::npos)
      << status.error_message();
  holding.Cancel();
  holding.Finish();
  stop.join();
  EXPECT_EQ(exit_code, 0);
}

// Four jobs of 23170 x 23170 x 0 in 76 bytes asked for 8.4 GB of results
// at once, and another client's jobs missed their deadlines while the
// results were zeroed. A job's result counts against its client's share
// before it runs, so the client's jobs run one at a time. (Scaled down:
// 5792 x 5792 x 0, 128 MiB of result each, in a budget that four fill.)
TEST(ClientShareTest, ResultsFarLargerThanTheirRequestCountBeforeTheyRun) {
  // Room for the four results and 1,000 bytes, less than a 64^3 job.
  constexpr uint64_t kResult = uint64_t{5792} * 5792 * 4;
  ServerProcess server({"--listen", "[::]:0", "--max-inflight-bytes",
                        std::to_string(4 * (kResult + 1024) + 1000),
                        "--max-job-bytes", std::to_string(kResult),
                        "--max-message-bytes",
                        std::to_string(kResult + (1 << 20))});
  ASSERT_TRUE(server.Start().ok());
  auto stub = v1::GemmService::NewStub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub->GemmStream(&context);
  // Their results are never read: they hold their bytes.
  for (uint64_t id = 1; id <= 4; ++id) {
    v1::StreamRequest whole;
    whole.set_job_id(id);
    *whole.mutable_job()->mutable_params() =
        Declare(id, 5792, 5792, 0).params();
    whole.mutable_job()->mutable_params()->set_inline_result_max_bytes(0);
    ASSERT_TRUE(stream->Write(whole));
  }
  EXPECT_EQ(VictimJobs(server.address_v6(), 3), 3);
  context.TryCancel();
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// 2,000,000 tiny jobs opened and never ended on one stream took 1.23 GB.
// A stream may have --max-open-jobs-per-stream jobs being received, and a
// client --max-client-jobs jobs in all.
TEST(ClientShareTest, OpenJobsArePerStreamAndPerClientBounded) {
  ServerProcess server({"--listen", "[::]:0", "--max-open-jobs-per-stream", "4",
                        "--max-client-jobs", "6"});
  ASSERT_TRUE(server.Start().ok());
  auto stub = v1::GemmService::NewStub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext first_context;
  auto first = stub->GemmStream(&first_context);
  for (uint64_t id = 1; id <= 5; ++id) {
    ASSERT_TRUE(first->Write(Declare(id, 1, 1, 1)));
  }
  auto ends = ReadEnds(first.get(), 1);
  ASSERT_EQ(ends.count(5), 1u);
  EXPECT_EQ(ends[5].first, grpc::RESOURCE_EXHAUSTED);
  EXPECT_NE(ends[5].second.find("--max-open-jobs-per-stream 4"),
            std::string::npos)
      << ends[5].second;
  // A second stream of the same client: two more jobs reach the client's
  // six, the third is turned away.
  grpc::ClientContext second_context;
  auto second = stub->GemmStream(&second_context);
  for (uint64_t id = 1; id <= 3; ++id) {
    ASSERT_TRUE(second->Write(Declare(id, 1, 1, 1)));
  }
  ends = ReadEnds(second.get(), 1);
  ASSERT_EQ(ends.count(3), 1u);
  EXPECT_EQ(ends[3].first, grpc::UNAVAILABLE);
  EXPECT_NE(ends[3].second.find("--max-client-jobs"), std::string::npos)
      << ends[3].second;
  // Another client is served meanwhile.
  EXPECT_EQ(VictimJobs(server.address_v6(), 2), 2);
  // Each refusal is logged with its client and status (issue 13).
  EXPECT_NE(server.Log().find("job refused: stream job 5 of client 127.0.0.1: "
                              "RESOURCE_EXHAUSTED"),
            std::string::npos)
      << server.Log();
  first_context.TryCancel();
  second_context.TryCancel();
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// 100,000 jobs opened on one stream and never ended cost the server one
// JobEnd each, refused one by one (a third of a 2-core machine's CPU in
// sendmsg). As many refused in a row as the stream may have open end the
// stream; fewer, or a job started between them, do not.
TEST(ClientShareTest, AStreamOpeningJobsItNeverEndsIsEnded) {
  ServerProcess server(
      {"--listen", "[::]:0", "--max-open-jobs-per-stream", "4"});
  ASSERT_TRUE(server.Start().ok());
  auto stub = v1::GemmService::NewStub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub->GemmStream(&context);
  // Four open, three refused, then one of the four ends and another starts
  // in its place: the streak is over.
  for (uint64_t id = 1; id <= 7; ++id) {
    ASSERT_TRUE(stream->Write(Declare(id, 1, 1, 1)));
  }
  auto ends = ReadEnds(stream.get(), 3);
  ASSERT_EQ(ends.size(), 3u);
  for (uint64_t id = 5; id <= 7; ++id) {
    EXPECT_EQ(ends[id].first, grpc::RESOURCE_EXHAUSTED) << id;
  }
  v1::StreamRequest end_one;
  end_one.set_job_id(1);
  end_one.set_end_of_job(true);
  ASSERT_TRUE(stream->Write(end_one));
  ends = ReadEnds(stream.get(), 1);
  ASSERT_EQ(ends.count(1), 1u);
  ASSERT_TRUE(stream->Write(Declare(8, 1, 1, 1)));
  // Now four refused in a row: the stream ends, the jobs it was receiving
  // with it, and no later message is read.
  for (uint64_t id = 9; id <= 13; ++id) {
    ASSERT_TRUE(stream->Write(Declare(id, 1, 1, 1)));
  }
  stream->WritesDone();
  ends.clear();
  v1::StreamResponse response;
  while (stream->Read(&response)) {
    if (response.has_end()) {
      ends[response.job_id()] = {response.end().code(),
                                 response.end().message()};
    }
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << status.error_message();
  EXPECT_NE(status.error_message().find("4 jobs in a row"), std::string::npos)
      << status.error_message();
  for (uint64_t id : {2, 3, 4, 8}) {
    ASSERT_EQ(ends.count(id), 1u) << id;
    EXPECT_EQ(ends[id].first, grpc::RESOURCE_EXHAUSTED) << id;
    EXPECT_NE(ends[id].second.find("the stream broke"), std::string::npos)
        << ends[id].second;
  }
  for (uint64_t id = 9; id <= 12; ++id) {
    ASSERT_EQ(ends.count(id), 1u) << id;
    EXPECT_NE(ends[id].second.find("--max-open-jobs-per-stream 4"),
              std::string::npos)
        << ends[id].second;
  }
  // The message after the fourth refusal was not read: no JobEnd.
  EXPECT_EQ(ends.count(13), 0u);
  // Another client is served meanwhile.
  EXPECT_EQ(VictimJobs(server.address_v6(), 2), 2);
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// A job held its client's job share until gRPC let go of its result's
// bytes, which may be after the client has the result: a client making one
// call at a time at exactly --max-client-jobs was now and then refused for
// the job it had just been answered. A job leaves the count as its answer
// is handed to gRPC (its bytes stay counted until sent).
TEST(ClientShareTest, OneCallAtATimeAtTheJobShareIsNeverRefused) {
  ServerProcess server({"--listen", "[::]:0", "--max-client-jobs", "1"});
  ASSERT_TRUE(server.Start().ok());
  auto stub = v1::GemmService::NewStub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  std::map<std::string, int> refused;
  for (int i = 0; i < 400; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
    v1::GemmResponse response;
    const grpc::Status status =
        stub->Gemm(&context, Request(96, 96, 4), &response);
    if (!status.ok()) ++refused["unary: " + status.error_message()];
  }
  EXPECT_EQ(server.Stop(SIGTERM), 0);
  // On a stream, a result in chunks: gRPC may hold the chunks (and with
  // them the job) after the client has the job's end. A stream would wait
  // for its share rather than refuse a job, but not while one of its jobs
  // is half received: one stays open, the other of the client's two.
  ServerProcess streams({"--listen", "[::]:0", "--max-client-jobs", "2"});
  ASSERT_TRUE(streams.Start().ok());
  stub = v1::GemmService::NewStub(grpc::CreateChannel(
      streams.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub->GemmStream(&context);
  ASSERT_TRUE(stream->Write(Declare(1000, 2, 2, 2)));
  for (uint64_t id = 1; id <= 400; ++id) {
    v1::StreamRequest request;
    request.set_job_id(id);
    *request.mutable_job() = Request(96, 96, 4);
    ASSERT_TRUE(stream->Write(request));
    v1::StreamResponse response;
    do {
      ASSERT_TRUE(stream->Read(&response)) << "job " << id;
    } while (!response.has_end());
    ASSERT_EQ(response.job_id(), id);
    if (response.end().code() != 0) {
      ++refused["stream: " + response.end().message()];
    }
  }
  context.TryCancel();
  for (const auto& [why, count] : refused) {
    ADD_FAILURE() << count << " refused: " << why;
  }
  EXPECT_EQ(streams.Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace gemm
