#include <cuda_runtime.h>

#include "tests/device_fault.h"

namespace gemm::testing {
namespace {

__global__ void WriteToNowhere(int* nowhere) { *nowhere = 1; }

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

}  // namespace gemm::testing
