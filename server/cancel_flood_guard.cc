#include "server/cancel_flood_guard.h"

#include <algorithm>
#include <vector>

namespace gemm::server {
namespace {

// Buckets kept before the full ones are dropped (a full bucket is the same
// as none).
constexpr size_t kPruneAt = 4096;

}  // namespace

bool CancelFloodGuard::OnEarlyCancel(const std::string& client,
                                     absl::Time now) {
  if (options_.max_early_cancels == 0) return false;
  const double capacity = static_cast<double>(options_.max_early_cancels);
  const double per_second = capacity / 10;
  absl::MutexLock lock(&mu_);
  if (buckets_.size() >= kPruneAt) {
    std::vector<std::string> full;
    for (const auto& [name, bucket] : buckets_) {
      if (bucket.tokens +
              absl::ToDoubleSeconds(now - bucket.updated) * per_second >=
          capacity) {
        full.push_back(name);
      }
    }
    for (const std::string& name : full) buckets_.erase(name);
  }
  auto [it, added] = buckets_.try_emplace(client, Bucket{capacity, now});
  Bucket& bucket = it->second;
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
  bucket.tokens = capacity;
  ++trips_;
  return true;
}

uint64_t CancelFloodGuard::trips() const {
  absl::MutexLock lock(&mu_);
  return trips_;
}

}  // namespace gemm::server
