// GemmServer in this process on a loopback port: its configuration checks,
// and what a client sees of requests at the edges of the limits.
#include "server/app/gemm_server.h"

#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/gemm.grpc.pb.h"
#include "proto/wire_codec.h"
#include "server/core/executor.h"
#include "server/core/gemm_job.h"

namespace gemm::server {
namespace {

GemmServer::Options CpuOptions() {
  GemmServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.backend = "cpu";
  return options;
}

// Issue 11, defect 5: --max-message-bytes 1048576 with the default
// --result-chunk-bytes 1048576 was accepted, and every stream with a result
// of more than one chunk then ended RESOURCE_EXHAUSTED (a chunk plus its
// header is larger than a message may be).
TEST(GemmServerTest, RefusesResultChunksThatCannotFitInAMessage) {
  GemmServer::Options options = CpuOptions();
  options.limits.max_message_bytes = 1 << 20;
  options.limits.result_chunk_bytes = 1 << 20;
  auto server = GemmServer::Create(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("result_chunk_bytes"),
            absl::string_view::npos)
      << server.status();
  EXPECT_NE(server.status().message().find("max_message_bytes"),
            absl::string_view::npos)
      << server.status();

  options.limits.result_chunk_bytes = (1 << 20) - 1024;
  auto fits = GemmServer::Create(options);
  ASSERT_TRUE(fits.ok()) << fits.status();
  (*fits)->Shutdown(absl::ZeroDuration());
}

// Forwards to the server's executor, counting batches; optionally runs each
// batch `delay` late and names its device `device` (as a CUDA device with a
// long product name would be).
class ObservedExecutor final : public ForwardingExecutor {
 public:
  struct Options {
    absl::Duration delay = absl::ZeroDuration();
    std::string device;  // empty: the inner executor's
  };
  ObservedExecutor(std::unique_ptr<Executor> inner, Options options,
                   std::atomic<int>* batches)
      : ForwardingExecutor(std::move(inner)),
        options_(options),
        batches_(batches) {}
  absl::Status Execute(const Batch& batch) override {
    batches_->fetch_add(1);
    absl::SleepFor(options_.delay);
    absl::Status status = ForwardingExecutor::Execute(batch);
    if (!options_.device.empty()) {
      for (const auto& job : batch) job->timing().device = options_.device;
    }
    return status;
  }

 private:
  const Options options_;
  std::atomic<int>* const batches_;
};

// A started GemmServer whose executor is observed, and a channel to it.
struct TestServer {
  explicit TestServer(GemmServer::Options options,
                      ObservedExecutor::Options executor = {}) {
    options.decorate_executor = [this, executor](std::unique_ptr<Executor> e) {
      return std::make_unique<ObservedExecutor>(std::move(e), executor,
                                                &batches);
    };
    auto created = GemmServer::Create(options);
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return;
    server = std::move(*created);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    channel =
        grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(server->port()),
                                  grpc::InsecureChannelCredentials(), args);
    stub = v1::GemmService::NewStub(channel);
  }

  v1::ServerStats Stats() {
    grpc::ClientContext context;
    v1::InfoResponse info;
    EXPECT_TRUE(stub->Info(&context, v1::InfoRequest(), &info).ok());
    return info.stats();
  }

  std::atomic<int> batches{0};
  std::unique_ptr<GemmServer> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::GemmService::Stub> stub;
};

v1::GemmRequest Request(uint32_t m, uint32_t n, uint32_t k) {
  v1::GemmRequest request;
  request.mutable_params()->set_m(m);
  request.mutable_params()->set_n(n);
  request.mutable_params()->set_k(k);
  request.mutable_params()->set_alpha(1);
  request.set_a(std::string(4 * uint64_t{m} * k, '\0'));
  request.set_b(std::string(4 * uint64_t{k} * n, '\0'));
  return request;
}

// A unary call with `bytes` as its request message, whatever they are.
grpc::Status CallWithBytes(grpc::Channel* channel, const std::string& method,
                           const std::string& bytes) {
  grpc::GenericStub stub(channel->shared_from_this());
  grpc::ClientContext context;
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  return status;
}

// Issue 11: bytes that are no InfoRequest got UNIMPLEMENTED with an empty
// message, where Gemm names the problem.
TEST(GemmServerTest, MalformedInfoRequestIsInvalidArgument) {
  TestServer t(CpuOptions());
  ASSERT_NE(t.server, nullptr);
  // A truncated varint field, then a tag with field number 0.
  for (const std::string& garbage :
       {std::string("\x08\xff"), std::string("\x00\x01", 2)}) {
    grpc::Status status =
        CallWithBytes(t.channel.get(), "/gemm.v1.GemmService/Info", garbage);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << status.error_message();
    EXPECT_NE(status.error_message().find("malformed InfoRequest"),
              std::string::npos)
        << status.error_message();
  }
  // An empty request, and one with a field Info does not know, still work.
  EXPECT_TRUE(
      CallWithBytes(t.channel.get(), "/gemm.v1.GemmService/Info", "").ok());
  EXPECT_TRUE(
      CallWithBytes(t.channel.get(), "/gemm.v1.GemmService/Info", "\x08\x01")
          .ok());
  EXPECT_EQ(t.Stats().jobs_ok(), 0u);
}

// Issue 11: a result larger than a message was found only after the job
// had run, and the job was counted in jobs_ok though the client got an
// error.
TEST(GemmServerTest, UnaryResultLargerThanAMessageIsRefusedUnrun) {
  GemmServer::Options options = CpuOptions();
  options.limits.max_message_bytes = 1 << 20;
  options.limits.result_chunk_bytes = 64 << 10;
  TestServer t(options);
  ASSERT_NE(t.server, nullptr);
  const v1::ServerStats before = t.Stats();
  // 7 KiB of operands, 1.44 MB of result.
  grpc::ClientContext context;
  v1::GemmResponse response;
  grpc::Status status = t.stub->Gemm(&context, Request(600, 600, 3), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  for (const char* fragment :
       {"1440000", "max_message_bytes (1048576)", "GemmStream"}) {
    EXPECT_NE(status.error_message().find(fragment), std::string::npos)
        << "'" << status.error_message() << "' should mention '" << fragment
        << "'";
  }
  EXPECT_EQ(t.batches.load(), 0) << "the job must not run";
  const v1::ServerStats after = t.Stats();
  EXPECT_EQ(after.jobs_ok(), before.jobs_ok());
  EXPECT_EQ(after.jobs_failed(), before.jobs_failed());
  EXPECT_EQ(after.jobs_rejected(), before.jobs_rejected() + 1);
  // A result that fits still comes back.
  grpc::ClientContext fits_context;
  ASSERT_TRUE(
      t.stub->Gemm(&fits_context, Request(300, 300, 3), &response).ok());
  EXPECT_EQ(response.c().size(), 4u * 300 * 300);
  EXPECT_EQ(t.Stats().jobs_ok(), before.jobs_ok() + 1);
}

// Whatever a client is sent is what Info counts: a job that ran but whose
// call had passed its deadline meanwhile never reached its client.
TEST(GemmServerTest, AResultThatArrivesAfterTheDeadlineCountsAsFailed) {
  TestServer t(CpuOptions(), {.delay = absl::Milliseconds(600)});
  ASSERT_NE(t.server, nullptr);
  const v1::ServerStats before = t.Stats();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(150));
  v1::GemmResponse response;
  EXPECT_EQ(t.stub->Gemm(&context, Request(8, 8, 8), &response).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  v1::ServerStats after = t.Stats();
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (after.jobs_ok() + after.jobs_failed() ==
             before.jobs_ok() + before.jobs_failed() &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
    after = t.Stats();
  }
  EXPECT_EQ(t.batches.load(), 1) << "the job ran";
  EXPECT_EQ(after.jobs_ok(), before.jobs_ok());
  EXPECT_EQ(after.jobs_failed(), before.jobs_failed() + 1);
}

// The tightest message limit the server accepts still carries every result
// message: an inline result as large as a chunk, and a unary result of the
// same size, with a long device name in their timing.
TEST(GemmServerTest, ResultMessagesFitTheTightestMessageLimit) {
  constexpr uint64_t kChunk = 4096;
  GemmServer::Options options = CpuOptions();
  options.limits.result_chunk_bytes = kChunk;
  options.limits.max_message_bytes = kChunk + wire::kResultMessageOverheadBytes;
  TestServer t(options, {.device = "cuda:0 " + std::string(240, 'G')});
  ASSERT_NE(t.server, nullptr);
  // 32 x 32 floats: exactly one chunk.
  const v1::GemmRequest job = Request(32, 32, 2);
  grpc::ClientContext stream_context;
  auto stream = t.stub->GemmStream(&stream_context);
  v1::StreamRequest request;
  request.set_job_id(std::numeric_limits<uint64_t>::max());
  *request.mutable_job() = job;
  request.mutable_job()->mutable_params()->set_inline_result_max_bytes(kChunk);
  ASSERT_TRUE(stream->Write(request));
  stream->WritesDone();
  v1::StreamResponse response;
  int ends = 0;
  uint64_t result_bytes = 0;
  while (stream->Read(&response)) {
    if (response.has_chunk()) result_bytes += response.chunk().data().size();
    if (response.has_end()) {
      ++ends;
      EXPECT_EQ(response.end().code(), 0) << response.end().message();
      result_bytes += response.end().c().size();
    }
  }
  grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(ends, 1);
  EXPECT_EQ(result_bytes, kChunk);

  grpc::ClientContext unary_context;
  v1::GemmResponse unary;
  status = t.stub->Gemm(&unary_context, job, &unary);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(unary.c().size(), kChunk);
}

}  // namespace
}  // namespace gemm::server
