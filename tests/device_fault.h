// A real device fault, for tests only: a kernel that writes to an address
// no allocation holds, so that the current device's CUDA context hits a
// sticky error (cudaErrorIllegalAddress) as a faulty kernel or bad memory
// would. Every later CUDA call on that device fails. And a silent one: a
// bit flipped in a result (FlipBitOnDevice).
//
//   FaultCurrentDevice();  // then watch the server take the device out
#ifndef GEMM_TESTS_DEVICE_FAULT_H_
#define GEMM_TESTS_DEVICE_FAULT_H_

namespace gemm::testing {

// Launches the faulting kernel on the current device and waits for it;
// returns the CUDA error it ended with (cudaErrorIllegalAddress expected).
int FaultCurrentDevice();

// Enqueues, on `stream` (a cudaStream_t), a kernel that flips bit `bit` of
// the float at device address `value`: silent corruption, as a faulty
// device might cause. Returns the launch's CUDA error (0 when enqueued).
int FlipBitOnDevice(float* value, int bit, void* stream);

}  // namespace gemm::testing

#endif  // GEMM_TESTS_DEVICE_FAULT_H_
