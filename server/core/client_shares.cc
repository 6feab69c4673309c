#include "server/core/client_shares.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"

namespace gemm::server {

ClientShare::ClientShare(std::string client, uint64_t max_bytes,
                         uint64_t max_jobs)
    : client_(std::move(client)), max_bytes_(max_bytes), max_jobs_(max_jobs) {}

absl::Status ClientShare::Take(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  if (max_bytes_ > 0 && (bytes > max_bytes_ || bytes_ > max_bytes_ - bytes)) {
    return absl::UnavailableError(absl::StrFormat(
        "client %s holds %d bytes of jobs in flight; its share is %d "
        "(--max-client-inflight-bytes); retry when its jobs finish",
        client_, bytes_, max_bytes_));
  }
  if (max_jobs_ > 0 && jobs_ >= max_jobs_) {
    return absl::UnavailableError(absl::StrFormat(
        "client %s holds %d jobs (declared and not yet answered); its share "
        "is %d (--max-client-jobs); retry when its jobs finish",
        client_, jobs_, max_jobs_));
  }
  if (max_jobs_ > 0 && answers_ >= max_jobs_ + kAnswersLag) {
    return absl::UnavailableError(absl::StrFormat(
        "client %s has %d answers not yet sent (results it has not read); "
        "it may have %d (--max-client-jobs %d, plus %d); read them, or "
        "retry later",
        client_, answers_, max_jobs_ + kAnswersLag, max_jobs_, kAnswersLag));
  }
  bytes_ += bytes;
  ++jobs_;
  return absl::OkStatus();
}

void ClientShare::Give(uint64_t bytes, bool answered) {
  absl::MutexLock lock(&mu_);
  bytes_ -= std::min(bytes, bytes_);
  uint64_t& count = answered ? answers_ : jobs_;
  if (count > 0) --count;
}

void ClientShare::Answered() {
  absl::MutexLock lock(&mu_);
  if (jobs_ > 0) --jobs_;
  ++answers_;
}

uint64_t ClientShare::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

uint64_t ClientShare::jobs() const {
  absl::MutexLock lock(&mu_);
  return jobs_;
}

uint64_t ClientShare::answers() const {
  absl::MutexLock lock(&mu_);
  return answers_;
}

std::shared_ptr<ClientShare> ClientShares::ShareOf(const std::string& client) {
  absl::MutexLock lock(&mu_);
  std::weak_ptr<ClientShare>& slot = shares_[client];
  std::shared_ptr<ClientShare> share = slot.lock();
  if (share == nullptr) {
    share = std::make_shared<ClientShare>(client, options_.max_bytes_per_client,
                                          options_.max_jobs_per_client);
    slot = share;
  }
  // Forget clients gone, once the map has doubled.
  if (shares_.size() >= next_sweep_at_) {
    for (auto it = shares_.begin(); it != shares_.end();) {
      it = it->second.expired() ? shares_.erase(it) : std::next(it);
    }
    next_sweep_at_ = std::max<size_t>(64, 2 * shares_.size());
  }
  return share;
}

size_t ClientShares::clients() {
  absl::MutexLock lock(&mu_);
  size_t alive = 0;
  for (const auto& [client, share] : shares_) alive += !share.expired();
  return alive;
}

}  // namespace gemm::server
