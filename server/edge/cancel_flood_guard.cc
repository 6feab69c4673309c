#include "server/edge/cancel_flood_guard.h"

#include <algorithm>

namespace gemm::server {

bool CancelFloodGuard::OnEarlyCancel(const std::string& client,
                                     absl::Time now) {
  if (options_.max_early_cancels == 0) return false;
  const double capacity = static_cast<double>(options_.max_early_cancels);
  const double per_second = capacity / 10;
  absl::MutexLock lock(&mu_);
  if (buckets_.size() >= prune_at_) PruneLocked(now);
  auto [it, added] = buckets_.try_emplace(client, Bucket{capacity, now});
  Bucket& bucket = it->second;
  if (now < bucket.shut_out_until) return false;
  if (!added) {
    const double elapsed =
        std::max(0.0, absl::ToDoubleSeconds(now - bucket.updated));
    bucket.tokens = std::min(capacity, bucket.tokens + elapsed * per_second);
    bucket.updated = now;
  }
  if (bucket.tokens >= 1) {
    bucket.tokens -= 1;
    return false;
  }
  bucket.shut_out_until = now + options_.shut_out_for;
  bucket.tokens = capacity;
  bucket.updated = bucket.shut_out_until;
  ++trips_;
  return true;
}

void CancelFloodGuard::PruneLocked(absl::Time now) {
  const double capacity = static_cast<double>(options_.max_early_cancels);
  const double per_second = capacity / 10;
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    const Bucket& b = it->second;
    const bool full =
        b.tokens + std::max(0.0, absl::ToDoubleSeconds(now - b.updated)) *
                       per_second >=
        capacity;
    it = full && now >= b.shut_out_until ? buckets_.erase(it) : std::next(it);
  }
  prune_at_ = std::max<size_t>(4096, 2 * buckets_.size());
}

uint64_t CancelFloodGuard::trips() const {
  absl::MutexLock lock(&mu_);
  return trips_;
}

}  // namespace gemm::server
