#include "server/cuda/stream_slots.h"

namespace gemm::server {

StreamSlots::StreamSlots(size_t devices, int streams_per_device)
    : busy_(devices, std::vector<bool>(streams_per_device, false)),
      load_(devices, 0),
      disabled_(devices, false) {}

bool StreamSlots::Pick(Slot* slot, size_t avoid) {
  bool found = false;
  const size_t n = busy_.size();
  // `avoid` counts only while another device is in service.
  if (avoid < n && !disabled_[avoid] && InServiceLocked() < 2) avoid = n;
  for (size_t i = 0; i < n; ++i) {
    const size_t device = (first_choice_ + i) % n;
    if (disabled_[device] || device == avoid) continue;
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

absl::StatusOr<StreamSlots::Slot> StreamSlots::Acquire(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  return AcquireLocked(bytes, busy_.size());
}

absl::StatusOr<StreamSlots::Slot> StreamSlots::AcquireAvoiding(uint64_t bytes,
                                                               size_t avoid) {
  absl::MutexLock lock(&mu_);
  return AcquireLocked(bytes, avoid);
}

absl::StatusOr<StreamSlots::Slot> StreamSlots::AcquireLocked(uint64_t bytes,
                                                             size_t avoid) {
  Slot slot;
  bool none_in_service = false;
  auto picked = [this, &slot, &none_in_service, avoid]()
                    ABSL_NO_THREAD_SAFETY_ANALYSIS {
                      none_in_service = InServiceLocked() == 0;
                      return none_in_service || Pick(&slot, avoid);
                    };
  mu_.Await(absl::Condition(&picked));
  if (none_in_service) {
    return absl::UnavailableError(
        "no GPU is in service: every device failed (see the server's log "
        "and Info)");
  }
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

void StreamSlots::Disable(size_t device) {
  absl::MutexLock lock(&mu_);
  disabled_[device] = true;
}

size_t StreamSlots::in_service() const {
  absl::MutexLock lock(&mu_);
  return InServiceLocked();
}

size_t StreamSlots::InServiceLocked() const {
  size_t n = 0;
  for (bool disabled : disabled_) n += disabled ? 0 : 1;
  return n;
}

}  // namespace gemm::server
