#include "server/observability/health_service.h"

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/testing/blocking_generic_call.h"

namespace gemm::server {
namespace {

constexpr char kCheck[] = "/grpc.health.v1.Health/Check";
constexpr char kWatch[] = "/grpc.health.v1.Health/Watch";

// The health service alone on a real gRPC server (127.0.0.1, a free port).
class HealthServiceTest : public ::testing::Test {
 protected:
  class Calls final : public grpc::CallbackGenericService {
   public:
    explicit Calls(HealthService* health) : health_(health) {}
    grpc::ServerGenericBidiReactor* CreateReactor(
        grpc::GenericCallbackServerContext* context) override {
      return health_->CreateReactor(context);
    }

   private:
    HealthService* const health_;
  };

  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterCallbackGenericService(&calls_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = std::make_unique<grpc::GenericStub>(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                            grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    health_.Shutdown();
    if (server_ != nullptr) server_->Shutdown();
  }

  // HealthCheckRequest{service}: field 1, length-delimited.
  static grpc::ByteBuffer Request(const std::string& service) {
    grpc::Slice slice(service.empty()
                          ? std::string()
                          : std::string(1, '\x0a') +
                                static_cast<char>(service.size()) + service);
    return grpc::ByteBuffer(&slice, 1);
  }
  // HealthCheckResponse.status, or -1 when the bytes are not one.
  static int Status(const grpc::ByteBuffer& response) {
    grpc::Slice slice;
    if (!response.DumpToSingleSlice(&slice).ok()) return -1;
    const std::string bytes(reinterpret_cast<const char*>(slice.begin()),
                            slice.size());
    if (bytes.empty()) return 0;
    return bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : -1;
  }

  // Check: the status, or minus the gRPC status code.
  int Check(const grpc::ByteBuffer& request) {
    BlockingGenericCall call(stub_.get(), kCheck, absl::Seconds(5));
    if (!call.Write(request)) return -100;
    call.WritesDone();
    grpc::ByteBuffer response;
    const bool got = call.Read(&response);
    const grpc::Status status = call.Finish();
    if (!status.ok()) return -static_cast<int>(status.error_code());
    return got ? Status(response) : -100;
  }

  HealthService health_;
  Calls calls_{&health_};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::GenericStub> stub_;
};

TEST_F(HealthServiceTest, CheckAnswersKnownServicesAndNotFoundForOthers) {
  EXPECT_EQ(Check(Request("")), HealthService::kServing);
  EXPECT_EQ(Check(Request("gemm.v1.GemmService")), -grpc::NOT_FOUND);
  health_.SetServingStatus("gemm.v1.GemmService", true);
  EXPECT_EQ(Check(Request("gemm.v1.GemmService")), HealthService::kServing);
  health_.SetServingStatus(false);
  EXPECT_EQ(Check(Request("")), HealthService::kNotServing);
  EXPECT_EQ(Check(Request("gemm.v1.GemmService")), HealthService::kNotServing);
  // Not a HealthCheckRequest: field 1 announced longer than the bytes.
  grpc::Slice broken(
      std::string("\x0a\x05"
                  "ab",
                  4));
  EXPECT_EQ(Check(grpc::ByteBuffer(&broken, 1)), -grpc::INVALID_ARGUMENT);
}

TEST_F(HealthServiceTest, WatchSendsEachChangeAndEndsAtShutdown) {
  BlockingGenericCall watch(stub_.get(), kWatch, absl::Seconds(10));
  ASSERT_TRUE(watch.Write(Request("later")));
  watch.WritesDone();
  grpc::ByteBuffer response;
  ASSERT_TRUE(watch.Read(&response));
  EXPECT_EQ(Status(response), HealthService::kServiceUnknown);
  health_.SetServingStatus("later", true);
  ASSERT_TRUE(watch.Read(&response));
  EXPECT_EQ(Status(response), HealthService::kServing);
  // Another service's change is not sent; a change of all is.
  health_.SetServingStatus("other", false);
  health_.SetServingStatus(false);
  ASSERT_TRUE(watch.Read(&response));
  EXPECT_EQ(Status(response), HealthService::kNotServing);
  // Back and forth faster than the client reads: the last status comes
  // last, and no write is left behind.
  for (int i = 0; i < 50; ++i) health_.SetServingStatus("later", i % 2 == 0);
  int last = 0;
  health_.Shutdown();
  while (watch.Read(&response)) last = Status(response);
  EXPECT_EQ(last, HealthService::kNotServing);
  EXPECT_EQ(watch.Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Check(Request("later")), HealthService::kNotServing);
}

TEST_F(HealthServiceTest, AWatchAfterShutdownEndsAtOnce) {
  health_.Shutdown();
  BlockingGenericCall watch(stub_.get(), kWatch, absl::Seconds(10));
  ASSERT_TRUE(watch.Write(Request("")));
  watch.WritesDone();
  grpc::ByteBuffer response;
  EXPECT_FALSE(watch.Read(&response));
  EXPECT_EQ(watch.Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace gemm::server
