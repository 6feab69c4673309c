// What the hostile-client suites (hostile_client_test*.cc,
// continuation_flood_test.cc) share: requests and stream declarations, a
// victim client that must still be served, Info on a fresh connection,
// waits on the server's unary read gate, and raw HTTP/2 frames.
//
// Thread-safety: free functions, one test thread.
//
//   ServerProcess server({"--listen", "[::]:0"});
//   ... attack server.address() ...
//   EXPECT_EQ(VictimJobs(server.address_v6(), 3), 3);
#ifndef GEMM_TESTS_HOSTILE_HOSTILE_CLIENT_H_
#define GEMM_TESTS_HOSTILE_HOSTILE_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "grpcpp/grpcpp.h"
#include "proto/gemm.grpc.pb.h"

namespace gemm::testing {

// A unary request of m x n x k, A all 0.5 and B all 0.25, alpha 1.
v1::GemmRequest Request(uint32_t m, uint32_t n, uint32_t k,
                        const std::string& kernel = "auto");

// A stream message that opens job `id` of m x n x k (params, no data).
v1::StreamRequest Declare(uint64_t id, uint32_t m, uint32_t n, uint32_t k);

// A path in the test's temporary folder, no file there yet.
std::string FreshTestFile(const std::string& name);

// Info on a new connection to `target`.
grpc::Status CallInfo(const std::string& target,
                      std::chrono::seconds timeout = std::chrono::seconds(5));

// Jobs of 64^3 on a new connection to `target`, one at a time, each with a
// 5 s deadline; the number that succeeded.
int VictimJobs(const std::string& target, int jobs);

// Waits until the server at `metrics_port` counts `reading` and `waiting`
// unary requests (UnaryReadGate); false, with a failure, after 10 s.
bool WaitForUnaryRequests(int metrics_port, double reading, double waiting);

// Reads JobEnds from `stream` until `count` have come; their codes by id.
std::map<uint64_t, std::pair<int, std::string>> ReadEnds(
    grpc::ClientReaderWriter<v1::StreamRequest, v1::StreamResponse>* stream,
    size_t count);

// An HTTP/2 frame: its 9-byte header, then `payload`.
std::string Http2Frame(uint8_t type, uint8_t flags, uint32_t stream,
                       const std::string& payload);

// An HPACK integer with a `prefix_bits` prefix, the byte's other bits 0.
std::string HpackInt(uint64_t value, int prefix_bits);

}  // namespace gemm::testing

#endif  // GEMM_TESTS_HOSTILE_HOSTILE_CLIENT_H_
