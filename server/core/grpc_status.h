// ToGrpcStatus: the server's one conversion from absl::Status to
// grpc::Status (the codes agree), for every reactor that answers a call.
//
// Thread-safety: a pure function.
//
//   reactor->Finish(ToGrpcStatus(status));
#ifndef GEMM_SERVER_CORE_GRPC_STATUS_H_
#define GEMM_SERVER_CORE_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace gemm::server {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

}  // namespace gemm::server

#endif  // GEMM_SERVER_CORE_GRPC_STATUS_H_
