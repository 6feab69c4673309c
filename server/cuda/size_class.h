// SizeClass: the block sizes of the server's memory pools (pinned host and
// device). 4 KiB at least, then quarter steps between powers of two, so a
// cached block serves any request within 25% below it.
//
// Thread-safety: a pure function.
//
//   const uint64_t size = SizeClass(bytes);  // >= bytes
//   auto it = free_blocks.find(size);
//   if (it == free_blocks.end()) cudaMalloc(&block, size);
#ifndef GEMM_SERVER_CUDA_SIZE_CLASS_H_
#define GEMM_SERVER_CUDA_SIZE_CLASS_H_

#include <cstdint>

namespace gemm::server {

inline uint64_t SizeClass(uint64_t bytes) {
  if (bytes <= 4096) return 4096;
  const int e = 63 - __builtin_clzll(bytes - 1);  // 2^e < bytes <= 2^(e+1)
  const uint64_t step = (uint64_t{1} << e) / 4;
  return (bytes + step - 1) / step * step;
}

}  // namespace gemm::server

#endif  // GEMM_SERVER_CUDA_SIZE_CLASS_H_
