#include "tests/health_check.h"

#include <chrono>
#include <vector>

#include "grpcpp/generic/generic_stub.h"

namespace gemm::testing {

int HealthCheck(const std::string& address,
                std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::GenericStub stub(grpc::CreateChannel(address, credentials));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  grpc::CompletionQueue cq;
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);
  auto call = stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check",
                                    request, &cq);
  call->StartCall();
  grpc::ByteBuffer reply;
  grpc::Status status;
  call->Finish(&reply, &status, reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!status.ok()) return -static_cast<int>(status.error_code());
  return HealthStatus(reply);
}

grpc::ByteBuffer HealthRequest(const std::string& service) {
  // Field 1, length-delimited.
  const std::string bytes =
      service.empty() ? std::string()
                      : std::string(1, '\x0a') +
                            static_cast<char>(service.size()) + service;
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

int HealthStatus(const grpc::ByteBuffer& response) {
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return 0;
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  // HealthCheckResponse{status = N}: field 1, varint.
  if (bytes.size() == 2 && bytes[0] == 0x08) return bytes[1];
  return 0;
}

}  // namespace gemm::testing
