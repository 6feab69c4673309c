#include "server/rpc/reflection_service.h"

#include <unordered_set>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.pb.h"
#include "proto/grpc/reflection/v1/reflection.grpc.pb.h"
#include "proto/grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "proto/wire_codec.h"

namespace gemm::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using grpc::reflection::v1::ServerReflectionRequest;
using grpc::reflection::v1::ServerReflectionResponse;

// Appends `file`, then every file it imports that is not in `sent` yet,
// depth first: each file once, whatever the shape of the import graph.
void AddFileAndImports(const FileDescriptor& file,
                       std::unordered_set<std::string>* sent,
                       grpc::reflection::v1::FileDescriptorResponse* out) {
  if (!sent->insert(file.name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file.CopyTo(&proto);
  proto.SerializeToString(out->add_file_descriptor_proto());
  for (int i = 0; i < file.dependency_count(); ++i) {
    AddFileAndImports(*file.dependency(i), sent, out);
  }
}

absl::Status AddFile(const FileDescriptor* file, const char* what,
                     ServerReflectionResponse* response) {
  if (file == nullptr)
    return absl::NotFoundError(absl::StrCat(what, " not found"));
  std::unordered_set<std::string> sent;
  AddFileAndImports(*file, &sent, response->mutable_file_descriptor_response());
  return absl::OkStatus();
}

absl::StatusOr<const Descriptor*> FindType(const DescriptorPool& pool,
                                           const std::string& name) {
  const Descriptor* type = pool.FindMessageTypeByName(name);
  if (type == nullptr) return absl::NotFoundError("message type not found");
  return type;
}

// Fills `response` with the answer to `request`; the error it gets instead.
absl::Status Fill(const DescriptorPool& pool,
                  const std::vector<std::string>& service_names,
                  const ServerReflectionRequest& request,
                  ServerReflectionResponse* response) {
  switch (request.message_request_case()) {
    case ServerReflectionRequest::kFileByFilename:
      return AddFile(pool.FindFileByName(request.file_by_filename()), "file",
                     response);
    case ServerReflectionRequest::kFileContainingSymbol:
      return AddFile(
          pool.FindFileContainingSymbol(request.file_containing_symbol()),
          "symbol", response);
    case ServerReflectionRequest::kFileContainingExtension: {
      const auto& asked = request.file_containing_extension();
      absl::StatusOr<const Descriptor*> type =
          FindType(pool, asked.containing_type());
      if (!type.ok()) return type.status();
      const FieldDescriptor* extension =
          pool.FindExtensionByNumber(*type, asked.extension_number());
      return AddFile(extension == nullptr ? nullptr : extension->file(),
                     "extension", response);
    }
    case ServerReflectionRequest::kAllExtensionNumbersOfType: {
      absl::StatusOr<const Descriptor*> type =
          FindType(pool, request.all_extension_numbers_of_type());
      if (!type.ok()) return type.status();
      std::vector<const FieldDescriptor*> extensions;
      pool.FindAllExtensions(*type, &extensions);
      auto* numbers = response->mutable_all_extension_numbers_response();
      numbers->set_base_type_name((*type)->full_name());
      for (const FieldDescriptor* e : extensions) {
        numbers->add_extension_number(e->number());
      }
      return absl::OkStatus();
    }
    case ServerReflectionRequest::kListServices: {
      auto* list = response->mutable_list_services_response();
      for (const std::string& name : service_names) {
        list->add_service()->set_name(name);
      }
      return absl::OkStatus();
    }
    case ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
      break;
  }
  return absl::UnimplementedError(
      "no request of a known kind (file_by_filename, file_containing_symbol, "
      "file_containing_extension, all_extension_numbers_of_type, "
      "list_services)");
}

}  // namespace

// One ServerReflectionInfo call, of either version: reads a request,
// writes its answer, and so on until the client half-closes.
class ReflectionService::Reactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit Reactor(const ReflectionService* service) : service_(service) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return Finish(grpc::Status::OK);
    ServerReflectionRequest request;
    const absl::Status decoded = wire::DecodeMessage(request_, &request);
    request_.Clear();
    if (!decoded.ok()) {
      return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 std::string(decoded.message())));
    }
    response_ = wire::EncodeMessage(service_->Answer(request));
    StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
    }
    StartRead(&request_);
  }
  void OnDone() override { delete this; }

 private:
  const ReflectionService* const service_;
  grpc::ByteBuffer request_;   // owned by the read in flight
  grpc::ByteBuffer response_;  // owned by the write in flight
};

// The generated service `Generated` (v1 or v1alpha::ServerReflection), its
// one method raw and answered by a Reactor.
template <typename Generated>
class ReflectionService::Endpoint final
    : public Generated::template WithRawCallbackMethod_ServerReflectionInfo<
          typename Generated::Service> {
 public:
  explicit Endpoint(const ReflectionService* service) : service_(service) {}

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
  ServerReflectionInfo(grpc::CallbackServerContext* /*context*/) override {
    return new Reactor(service_);
  }

 private:
  const ReflectionService* const service_;
};

ReflectionService::ReflectionService(const Options& options)
    : pool_(options.pool != nullptr ? options.pool
                                    : DescriptorPool::generated_pool()),
      service_names_(options.services),
      v1_(std::make_unique<Endpoint<grpc::reflection::v1::ServerReflection>>(
          this)),
      v1alpha_(std::make_unique<
               Endpoint<grpc::reflection::v1alpha::ServerReflection>>(this)) {
  service_names_.push_back(
      grpc::reflection::v1::ServerReflection::service_full_name());
  service_names_.push_back(
      grpc::reflection::v1alpha::ServerReflection::service_full_name());
}

ReflectionService::~ReflectionService() = default;

std::vector<grpc::Service*> ReflectionService::services() const {
  return {v1_.get(), v1alpha_.get()};
}

ServerReflectionResponse ReflectionService::Answer(
    const ServerReflectionRequest& request) const {
  ServerReflectionResponse response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  const absl::Status status = Fill(*pool_, service_names_, request, &response);
  if (!status.ok()) {
    // Replaces any partial answer (one field of the oneof).
    auto* error = response.mutable_error_response();
    error->set_error_code(static_cast<int>(status.code()));
    error->set_error_message(std::string(status.message()));
  }
  return response;
}

}  // namespace gemm::server
