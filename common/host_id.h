// This host's id: /proc/sys/kernel/random/boot_id, which containers on one
// host share. A shared-memory region's caller sends it, and the server
// compares it with its own, to tell a caller on another host
// (gemm.proto's RegisterRegionRequest.host_id).
//
// Thread-safety: reads a file; safe from any thread.
//
//   request.set_host_id(ReadHostId());
#ifndef GEMM_COMMON_HOST_ID_H_
#define GEMM_COMMON_HOST_ID_H_

#include <string>

namespace gemm {

// The boot id, or "" when it cannot be read.
std::string ReadHostId();

}  // namespace gemm

#endif  // GEMM_COMMON_HOST_ID_H_
