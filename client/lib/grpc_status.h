// The client's one conversion from a gRPC status back to an absl::Status
// (the server converts the other way, once, at its service edge).
//
// Thread-safety: a stateless function.
//
//   grpc::Status status = stub->Info(&context, request, &response);
//   if (!status.ok()) return FromGrpcStatus(status);
//   return response;
#ifndef GEMM_CLIENT_LIB_GRPC_STATUS_H_
#define GEMM_CLIENT_LIB_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace gemm::client {

// The same code and message; OK for OK.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_LIB_GRPC_STATUS_H_
