// ReflectionService: gRPC server reflection in both of its versions,
// grpc.reflection.v1 and its predecessor v1alpha, so that generic clients
// (grpcurl, grpc_cli, Postman) can list the server's services and fetch the
// descriptors to call them, with nothing from this repository.
//
// The two versions' messages are the same bytes on the wire
// (proto/grpc/reflection/), so both services are raw methods sharing one
// reactor and one Answer(). Descriptors come from a DescriptorPool, by
// default the process's generated pool (every .proto compiled into the
// server). The answers are those of gRPC's own C++ implementation: a file
// comes with every file it imports, transitively, each once, the file asked
// for first; a name the pool does not know gets an ErrorResponse with
// NOT_FOUND, a request of no known kind one with UNIMPLEMENTED, and the
// stream goes on. Bytes that are not a ServerReflectionRequest end the call
// with INVALID_ARGUMENT.
//
// Thread-safety: thread-safe (nothing changes after construction); gRPC
// calls it from its own threads.
//
//   ReflectionService reflection({.services = {"gemm.v1.GemmService"}});
//   for (grpc::Service* s : reflection.services()) builder.RegisterService(s);
#ifndef GEMM_SERVER_RPC_REFLECTION_SERVICE_H_
#define GEMM_SERVER_RPC_REFLECTION_SERVICE_H_

#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "grpcpp/grpcpp.h"
#include "proto/grpc/reflection/v1/reflection.pb.h"

namespace gemm::server {

class ReflectionService {
 public:
  struct Options {
    // The services ListServices names, besides the two reflection services
    // themselves. Default: none.
    std::vector<std::string> services;
    // Where descriptors come from; must outlive the service. Default
    // nullptr: google::protobuf::DescriptorPool::generated_pool().
    const google::protobuf::DescriptorPool* pool = nullptr;
  };

  explicit ReflectionService(const Options& options);
  ~ReflectionService();

  // The gRPC services to register: grpc.reflection.v1.ServerReflection and
  // grpc.reflection.v1alpha.ServerReflection. Owned by this object.
  std::vector<grpc::Service*> services() const;

  // The response to one request of either version.
  grpc::reflection::v1::ServerReflectionResponse Answer(
      const grpc::reflection::v1::ServerReflectionRequest& request) const;

 private:
  class Reactor;
  template <typename Generated>
  class Endpoint;

  const google::protobuf::DescriptorPool* const pool_;
  std::vector<std::string> service_names_;
  std::unique_ptr<grpc::Service> v1_;
  std::unique_ptr<grpc::Service> v1alpha_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_RPC_REFLECTION_SERVICE_H_
