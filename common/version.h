#ifndef GEMM_COMMON_VERSION_H_
#define GEMM_COMMON_VERSION_H_

namespace gemm {

// The service's version (semantic versioning), reported by Info.
inline constexpr char kVersion[] = "0.2.0";

}  // namespace gemm

#endif  // GEMM_COMMON_VERSION_H_
