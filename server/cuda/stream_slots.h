// StreamSlots: where the CUDA backend runs its next batch. Each device has
// a fixed number of streams; a batch takes a free stream on the
// least-loaded device (load: bytes of the batches running there), ties
// going round-robin so that light load still spreads over every device,
// and waits when every stream is busy. A device taken out of service
// (Disable: it failed) gets no more batches.
//
// Thread-safety: thread-safe.
//
//   StreamSlots slots(/*devices=*/2, /*streams_per_device=*/4);
//   ASSIGN_OR_RETURN(StreamSlots::Slot slot, slots.Acquire(batch_bytes));
//   slots.Release(slot, batch_bytes);
#ifndef GEMM_SERVER_CUDA_STREAM_SLOTS_H_
#define GEMM_SERVER_CUDA_STREAM_SLOTS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace gemm::server {

class StreamSlots {
 public:
  // A stream of a device, by index.
  struct Slot {
    size_t device = 0;
    size_t stream = 0;
  };

  StreamSlots(size_t devices, int streams_per_device);

  // Takes a free stream on the least-loaded device in service, waiting for
  // one, and adds `bytes` to that device's load. UNAVAILABLE once no device
  // is in service.
  absl::StatusOr<Slot> Acquire(uint64_t bytes);
  // The same, on a device other than `avoid` while another is in service
  // (a re-run after a failed result check).
  absl::StatusOr<Slot> AcquireAvoiding(uint64_t bytes, size_t avoid);
  // Gives back a slot from Acquire(`bytes`).
  void Release(Slot slot, uint64_t bytes);
  // Takes `device` out of service for good; its slots still in use are
  // given back as usual.
  void Disable(size_t device);
  // Devices still in service.
  size_t in_service() const;

 private:
  // Finds a slot for Acquire; false when every stream is busy.
  bool Pick(Slot* slot, size_t avoid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Slot> AcquireLocked(uint64_t bytes, size_t avoid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t InServiceLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::vector<bool>> busy_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> load_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> disabled_ ABSL_GUARDED_BY(mu_);
  // The device that wins the next tie.
  size_t first_choice_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CUDA_STREAM_SLOTS_H_
