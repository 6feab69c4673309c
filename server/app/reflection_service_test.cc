// Server reflection as GemmServer serves it, over a loopback socket, in both
// versions (grpc.reflection.v1 and v1alpha, whose messages are the same on
// the wire), driven with raw messages as any reflection client sends them.
// Descriptors that come back are rebuilt the way grpc_cli and grpcurl do:
// into a DescriptorPool over a database of the files received.
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/descriptor_database.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grpc/reflection/v1/reflection.pb.h"
#include "server/app/gemm_server.h"
#include "server/app/reflection_service_test.pb.h"
#include "server/testing/blocking_generic_call.h"

namespace gemm::server {
namespace {

using google::protobuf::FileDescriptorProto;
using grpc::reflection::v1::ServerReflectionRequest;
using grpc::reflection::v1::ServerReflectionResponse;

// One ServerReflectionInfo call of `method`: sends `messages`, half-closes
// and reads every response; the call's status when it fails.
absl::StatusOr<std::vector<ServerReflectionResponse>> Exchange(
    grpc::GenericStub* stub, const std::string& method,
    const std::vector<std::string>& messages) {
  BlockingGenericCall call(stub, method, absl::Seconds(20));
  for (const std::string& message : messages) {
    grpc::Slice slice(message);
    if (!call.Write(grpc::ByteBuffer(&slice, 1))) break;
  }
  call.WritesDone();
  std::vector<ServerReflectionResponse> responses;
  grpc::ByteBuffer buffer;
  while (call.Read(&buffer)) {
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(buffer.Dump(&slices).ok());
    std::string bytes;
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    EXPECT_TRUE(responses.emplace_back().ParseFromString(bytes));
  }
  const grpc::Status status = call.Finish();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return responses;
}

// The file descriptors of a file_descriptor_response, in order.
std::vector<FileDescriptorProto> Files(const ServerReflectionResponse& r) {
  std::vector<FileDescriptorProto> files;
  for (const std::string& bytes :
       r.file_descriptor_response().file_descriptor_proto()) {
    EXPECT_TRUE(files.emplace_back().ParseFromString(bytes));
  }
  return files;
}

// Checks that every file comes once and that every file a returned file
// imports was returned too, so that a client can resolve them all.
void ExpectClosedUnderImports(const std::vector<FileDescriptorProto>& files) {
  std::set<std::string> names;
  for (const FileDescriptorProto& f : files) {
    EXPECT_TRUE(names.insert(f.name()).second) << f.name() << " sent twice";
  }
  for (const FileDescriptorProto& f : files) {
    for (const std::string& dependency : f.dependency()) {
      EXPECT_EQ(names.count(dependency), 1u)
          << f.name() << " imports " << dependency << ", not sent";
    }
  }
}

class ReflectionTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    GemmServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.backend = "cpu";
    auto server = GemmServer::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    stub_ = std::make_unique<grpc::GenericStub>(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                            grpc::InsecureChannelCredentials()));
  }

  // The responses to `requests`, on one call of the version under test.
  std::vector<ServerReflectionResponse> Ask(
      const std::vector<ServerReflectionRequest>& requests) {
    std::vector<std::string> messages;
    for (const ServerReflectionRequest& r : requests) {
      messages.push_back(r.SerializeAsString());
    }
    auto responses = Exchange(stub_.get(), Method(), messages);
    EXPECT_TRUE(responses.ok()) << responses.status();
    if (!responses.ok()) return {};
    EXPECT_EQ(responses->size(), requests.size());
    return *responses;
  }
  ServerReflectionResponse AskOne(const ServerReflectionRequest& request) {
    std::vector<ServerReflectionResponse> responses = Ask({request});
    return responses.empty() ? ServerReflectionResponse() : responses[0];
  }
  std::string Method() const {
    return "/grpc.reflection." + GetParam() +
           ".ServerReflection/ServerReflectionInfo";
  }

  static GemmServer* server_;
  std::unique_ptr<grpc::GenericStub> stub_;
};
GemmServer* ReflectionTest::server_ = nullptr;

ServerReflectionRequest Symbol(const std::string& symbol) {
  ServerReflectionRequest request;
  request.set_file_containing_symbol(symbol);
  return request;
}

TEST_P(ReflectionTest, ListsEveryServiceOnce) {
  ServerReflectionRequest request;
  request.set_host("localhost");
  request.set_list_services("");
  const ServerReflectionResponse response = AskOne(request);
  ASSERT_TRUE(response.has_list_services_response())
      << response.ShortDebugString();
  EXPECT_EQ(response.valid_host(), "localhost");
  EXPECT_EQ(response.original_request().host(), "localhost");
  EXPECT_TRUE(response.original_request().has_list_services());
  std::multiset<std::string> names;
  for (const auto& service : response.list_services_response().service()) {
    names.insert(service.name());
  }
  for (const char* name : {"gemm.v1.GemmService", "grpc.health.v1.Health",
                           "grpc.reflection.v1.ServerReflection",
                           "grpc.reflection.v1alpha.ServerReflection"}) {
    EXPECT_EQ(names.count(name), 1u) << name;
  }
}

TEST_P(ReflectionTest, TheGemmServiceCanBeRebuiltFromItsFiles) {
  const ServerReflectionResponse response =
      AskOne(Symbol("gemm.v1.GemmService"));
  ASSERT_TRUE(response.has_file_descriptor_response())
      << response.ShortDebugString();
  const std::vector<FileDescriptorProto> files = Files(response);
  ASSERT_FALSE(files.empty());
  EXPECT_EQ(files[0].name(), "proto/gemm.proto") << "the file asked for first";
  ExpectClosedUnderImports(files);
  google::protobuf::SimpleDescriptorDatabase database;
  for (const FileDescriptorProto& f : files) ASSERT_TRUE(database.Add(f));
  google::protobuf::DescriptorPool pool(&database);
  const google::protobuf::ServiceDescriptor* service =
      pool.FindServiceByName("gemm.v1.GemmService");
  ASSERT_NE(service, nullptr);
  ASSERT_EQ(service->method_count(), 6);
  const auto* info = service->FindMethodByName("Info");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->input_type()->full_name(), "gemm.v1.InfoRequest");
  EXPECT_EQ(info->output_type()->full_name(), "gemm.v1.InfoResponse");
  const auto* gemm = service->FindMethodByName("Gemm");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->input_type()->full_name(), "gemm.v1.GemmRequest");
  EXPECT_FALSE(gemm->client_streaming());
  const auto* stream = service->FindMethodByName("GemmStream");
  ASSERT_NE(stream, nullptr);
  EXPECT_TRUE(stream->client_streaming());
  EXPECT_TRUE(stream->server_streaming());
  EXPECT_EQ(stream->output_type()->full_name(), "gemm.v1.StreamResponse");
  EXPECT_NE(pool.FindMessageTypeByName("gemm.v1.JobEnd"), nullptr);
  // A method and a message name the same file.
  for (const char* symbol : {"gemm.v1.GemmService.Gemm", "gemm.v1.Timing"}) {
    const std::vector<FileDescriptorProto> again =
        Files(AskOne(Symbol(symbol)));
    ASSERT_FALSE(again.empty()) << symbol;
    EXPECT_EQ(again[0].name(), "proto/gemm.proto") << symbol;
  }
}

TEST_P(ReflectionTest, BothReflectionServicesDescribeThemselves) {
  for (const char* name : {"grpc.reflection.v1.ServerReflection",
                           "grpc.reflection.v1alpha.ServerReflection"}) {
    const std::vector<FileDescriptorProto> files = Files(AskOne(Symbol(name)));
    ASSERT_FALSE(files.empty()) << name;
    ExpectClosedUnderImports(files);
    google::protobuf::SimpleDescriptorDatabase database;
    for (const FileDescriptorProto& f : files) ASSERT_TRUE(database.Add(f));
    google::protobuf::DescriptorPool pool(&database);
    const auto* service = pool.FindServiceByName(name);
    ASSERT_NE(service, nullptr) << name;
    const auto* method = service->FindMethodByName("ServerReflectionInfo");
    ASSERT_NE(method, nullptr) << name;
    EXPECT_NE(method->input_type()->FindFieldByName("list_services"), nullptr);
  }
}

TEST_P(ReflectionTest, DependenciesComeOnceEachAfterTheFileAskedFor) {
  // api.proto imports source_context.proto and type.proto, which imports
  // source_context.proto again and any.proto.
  const std::vector<FileDescriptorProto> files =
      Files(AskOne(Symbol("google.protobuf.Api")));
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0].name(), "google/protobuf/api.proto");
  ExpectClosedUnderImports(files);
}

TEST_P(ReflectionTest, FileByFilename) {
  ServerReflectionRequest request;
  request.set_file_by_filename("proto/gemm.proto");
  const std::vector<FileDescriptorProto> files = Files(AskOne(request));
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].package(), "gemm.v1");
  request.set_file_by_filename("proto/no_such.proto");
  const ServerReflectionResponse missing = AskOne(request);
  ASSERT_TRUE(missing.has_error_response()) << missing.ShortDebugString();
  EXPECT_EQ(missing.error_response().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_P(ReflectionTest, Extensions) {
  // Linked into this test, so in the server's (this process's) pool.
  ASSERT_NE(reflection_test::Extendable::descriptor(), nullptr);
  ServerReflectionRequest request;
  request.mutable_file_containing_extension()->set_containing_type(
      "gemm.reflection_test.Extendable");
  request.mutable_file_containing_extension()->set_extension_number(150);
  const std::vector<FileDescriptorProto> files = Files(AskOne(request));
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].name(), "server/app/reflection_service_test.proto");

  ServerReflectionRequest numbers;
  numbers.set_all_extension_numbers_of_type("gemm.reflection_test.Extendable");
  const ServerReflectionResponse all = AskOne(numbers);
  ASSERT_TRUE(all.has_all_extension_numbers_response())
      << all.ShortDebugString();
  EXPECT_EQ(all.all_extension_numbers_response().base_type_name(),
            "gemm.reflection_test.Extendable");
  std::vector<int> got(
      all.all_extension_numbers_response().extension_number().begin(),
      all.all_extension_numbers_response().extension_number().end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int>{100, 150}));
}

TEST_P(ReflectionTest, UnknownNamesAreNotFoundAndTheStreamGoesOn) {
  std::vector<ServerReflectionRequest> requests;
  requests.push_back(Symbol("gemm.v1.NoSuchService"));
  requests.emplace_back()
      .mutable_file_containing_extension()
      ->set_containing_type("gemm.reflection_test.Extendable");
  requests.back().mutable_file_containing_extension()->set_extension_number(
      101);
  requests.emplace_back()
      .mutable_file_containing_extension()
      ->set_containing_type("no.such.Type");
  requests.emplace_back().set_all_extension_numbers_of_type("no.such.Type");
  requests.push_back(Symbol("gemm.v1.GemmService"));
  const std::vector<ServerReflectionResponse> responses = Ask(requests);
  ASSERT_EQ(responses.size(), 5u);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(responses[i].has_error_response())
        << i << ": " << responses[i].ShortDebugString();
    EXPECT_EQ(responses[i].error_response().error_code(),
              grpc::StatusCode::NOT_FOUND)
        << i;
    EXPECT_FALSE(responses[i].error_response().error_message().empty()) << i;
    EXPECT_EQ(responses[i].original_request().SerializeAsString(),
              requests[i].SerializeAsString())
        << i;
  }
  EXPECT_TRUE(responses[4].has_file_descriptor_response());
}

TEST_P(ReflectionTest, ARequestOfNoKnownKindIsUnimplemented) {
  const ServerReflectionResponse response = AskOne(ServerReflectionRequest());
  ASSERT_TRUE(response.has_error_response()) << response.ShortDebugString();
  EXPECT_EQ(response.error_response().error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST_P(ReflectionTest, MalformedRequestIsInvalidArgument) {
  // file_containing_symbol (field 4) says 5 bytes follow; 4 do.
  auto responses =
      Exchange(stub_.get(), Method(), {std::string("\x22\x05gemm", 6)});
  ASSERT_FALSE(responses.ok());
  EXPECT_EQ(responses.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(responses.status().message().find("ServerReflectionRequest"),
            std::string::npos)
      << responses.status();
}

INSTANTIATE_TEST_SUITE_P(Versions, ReflectionTest,
                         ::testing::Values("v1", "v1alpha"));

}  // namespace
}  // namespace gemm::server
