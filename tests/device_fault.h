// A real device fault, for tests only: a kernel that writes to an address
// no allocation holds, so that the current device's CUDA context hits a
// sticky error (cudaErrorIllegalAddress) as a faulty kernel or bad memory
// would. Every later CUDA call on that device fails.
//
//   FaultCurrentDevice();  // then watch the server take the device out
#ifndef GEMM_TESTS_DEVICE_FAULT_H_
#define GEMM_TESTS_DEVICE_FAULT_H_

namespace gemm::testing {

// Launches the faulting kernel on the current device and waits for it;
// returns the CUDA error it ended with (cudaErrorIllegalAddress expected).
int FaultCurrentDevice();

}  // namespace gemm::testing

#endif  // GEMM_TESTS_DEVICE_FAULT_H_
