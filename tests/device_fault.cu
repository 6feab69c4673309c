#include <cuda_runtime.h>

#include "tests/device_fault.h"

namespace gemm::testing {
namespace {

__global__ void WriteToNowhere(int* nowhere) { *nowhere = 1; }

__global__ void FlipBit(unsigned int* word, unsigned int mask) {
  *word ^= mask;
}

}  // namespace

int FaultCurrentDevice() {
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
    return static_cast<int>(cudaGetLastError());
  // An address far from any allocation, not null (which some drivers trap
  // differently).
  WriteToNowhere<<<1, 1, 0, stream>>>(reinterpret_cast<int*>(0x10));
  return static_cast<int>(cudaStreamSynchronize(stream));
}

int FlipBitOnDevice(float* value, int bit, void* stream) {
  FlipBit<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<unsigned int*>(value), 1u << bit);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace gemm::testing
