// What `gemm-client info` prints: a server's Info (version, backend,
// devices, kernels, limits, batching, counters) as lines of text.
//
// Thread-safety: a stateless function.
//
//   ASSIGN_OR_RETURN(v1::InfoResponse info, client->Info());
//   std::fputs(FormatInfo("host:50051", info).c_str(), stdout);
//   // server   host:50051 (gemm-service 0.2.0)\nbackend  cpu\n...
#ifndef GEMM_CLIENT_CLI_INFO_TEXT_H_
#define GEMM_CLIENT_CLI_INFO_TEXT_H_

#include <string>

#include "proto/gemm.pb.h"

namespace gemm::client {

// `server` is the address as the user gave it.
std::string FormatInfo(const std::string& server, const v1::InfoResponse& info);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_INFO_TEXT_H_
