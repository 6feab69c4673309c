// HealthCheck: the standard grpc.health.v1.Health/Check for the whole
// server, as a load balancer or a probe asks it, for the end-to-end tests.
//
// Thread-safety: a stateless function.
//
//   EXPECT_EQ(HealthCheck(server.address()), 1) << "SERVING";
#ifndef GEMM_TESTS_HEALTH_CHECK_H_
#define GEMM_TESTS_HEALTH_CHECK_H_

#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"

namespace gemm::testing {

// 1 SERVING, 2 NOT_SERVING, minus the gRPC status code when the call failed
// (5 s deadline), 0 for a reply that is not a HealthCheckResponse.
int HealthCheck(const std::string& address,
                std::shared_ptr<grpc::ChannelCredentials> credentials =
                    grpc::InsecureChannelCredentials());

// A HealthCheckRequest naming `service` (under 128 bytes).
grpc::ByteBuffer HealthRequest(const std::string& service);
// The status of a HealthCheckResponse; 0 when the bytes are not one (or
// say UNKNOWN).
int HealthStatus(const grpc::ByteBuffer& response);

}  // namespace gemm::testing

#endif  // GEMM_TESTS_HEALTH_CHECK_H_
