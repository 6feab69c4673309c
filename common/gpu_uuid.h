// A GPU's UUID as nvidia-smi prints it ("GPU-8c3f0b1e-1a2b-..."), from the
// 16 bytes of cudaDeviceProp::uuid: how a CUDA IPC region names its device
// across processes, whose CUDA ordinals may differ (gemm.proto's
// CudaIpcMemory.device_uuid). Header-only, no CUDA headers.
//
// Thread-safety: a pure function.
//
//   std::string uuid = FormatGpuUuid(
//       reinterpret_cast<const unsigned char*>(prop.uuid.bytes));
#ifndef GEMM_COMMON_GPU_UUID_H_
#define GEMM_COMMON_GPU_UUID_H_

#include <string>

#include "absl/strings/str_format.h"

namespace gemm {

inline std::string FormatGpuUuid(const unsigned char* b) {
  return absl::StrFormat(
      "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%"
      "02x",
      b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
      b[12], b[13], b[14], b[15]);
}

}  // namespace gemm

#endif  // GEMM_COMMON_GPU_UUID_H_
