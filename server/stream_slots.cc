#include "server/stream_slots.h"

namespace gemm::server {

StreamSlots::StreamSlots(size_t devices, int streams_per_device)
    : busy_(devices, std::vector<bool>(streams_per_device, false)),
      load_(devices, 0) {}

bool StreamSlots::Pick(Slot* slot) {
  bool found = false;
  const size_t n = busy_.size();
  for (size_t i = 0; i < n; ++i) {
    const size_t device = (first_choice_ + i) % n;
    for (size_t stream = 0; stream < busy_[device].size(); ++stream) {
      if (busy_[device][stream]) continue;
      if (!found || load_[device] < load_[slot->device]) {
        *slot = Slot{device, stream};
        found = true;
      }
      break;
    }
  }
  return found;
}

StreamSlots::Slot StreamSlots::Acquire(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  Slot slot;
  auto picked = [this, &slot]()
                    ABSL_NO_THREAD_SAFETY_ANALYSIS { return Pick(&slot); };
  mu_.Await(absl::Condition(&picked));
  first_choice_ = (slot.device + 1) % busy_.size();
  busy_[slot.device][slot.stream] = true;
  load_[slot.device] += bytes;
  return slot;
}

void StreamSlots::Release(Slot slot, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  busy_[slot.device][slot.stream] = false;
  load_[slot.device] -= bytes;
}

}  // namespace gemm::server
