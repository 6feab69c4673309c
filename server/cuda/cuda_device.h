// CudaDevice: one GPU as the CUDA backend holds it: its description, its
// streams (each with the four events that time a batch on it) and its
// DeviceMemoryPool. Which stream a batch uses is StreamSlots' decision.
//
// Thread-safety: immutable after Create(), apart from the pool (thread-
// safe); a stream is used by one batch at a time (StreamSlots).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device,
//                    CudaDevice::Create(/*ordinal=*/0, options));
//   cudaStream_t stream = device->stream(0).stream;
#ifndef GEMM_SERVER_CUDA_CUDA_DEVICE_H_
#define GEMM_SERVER_CUDA_CUDA_DEVICE_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/cuda/cuda_executor_options.h"
#include "server/cuda/device_memory_pool.h"

namespace gemm::server {

// CUDA errors that leave a device's context unusable (CUDA's "sticky"
// errors: every later call on it fails the same way), or mean the device
// is gone; a device that returns one is taken out of service.
bool IsStickyCudaError(cudaError_t error);

class CudaDevice {
 public:
  // One stream and the events of the batch running on it.
  struct Stream {
    cudaStream_t stream = nullptr;
    // Where a checked batch's predictions run, beside its kernel.
    cudaStream_t side = nullptr;
    // Recorded before H2D, after H2D, after the kernel, after D2H; and for
    // a checked batch, after the predictions (on `side`), after the
    // verdicts, before the D2H of C, and after the input C's sums.
    cudaEvent_t events[8] = {};
  };

  // Opens device `ordinal`: its description, options.streams_per_device
  // streams with their events, and a pool of
  // options.device_memory_budget_bytes (0: 90% of the memory free now).
  // Leaves the device current.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Create(
      int ordinal, const CudaExecutorOptions& options);
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;
  // Waits for its streams, then releases them and the pool's blocks.
  ~CudaDevice();

  int ordinal() const { return ordinal_; }
  const std::string& name() const { return name_; }    // "NVIDIA H200"
  const std::string& label() const { return label_; }  // "cuda:0 NVIDIA H200"
  uint64_t memory_bytes() const { return memory_bytes_; }
  const std::string& compute_capability() const { return compute_capability_; }
  DeviceMemoryPool& pool() { return *pool_; }
  const Stream& stream(size_t index) const { return streams_[index]; }

  // A device whose CUDA context hit a sticky error (a kernel fault, an
  // uncorrectable ECC error, a lost device) serves nothing more: every CUDA
  // call on it fails from then on. Thread-safe.
  void MarkFailed(std::string why) ABSL_LOCKS_EXCLUDED(failure_mu_);
  // Empty while the device is in service; else why it is not.
  std::string failure() const ABSL_LOCKS_EXCLUDED(failure_mu_);

  // Results computed here that failed their check (ABFT). Thread-safe.
  void CountCheckMismatch() { check_mismatches_.fetch_add(1); }
  uint64_t check_mismatches() const { return check_mismatches_.load(); }

 private:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {}

  const int ordinal_;
  std::string name_;
  std::string label_;
  uint64_t memory_bytes_ = 0;
  std::string compute_capability_;
  std::vector<Stream> streams_;
  std::unique_ptr<DeviceMemoryPool> pool_;
  mutable absl::Mutex failure_mu_;
  std::string failure_ ABSL_GUARDED_BY(failure_mu_);
  std::atomic<uint64_t> check_mismatches_{0};
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CUDA_CUDA_DEVICE_H_
