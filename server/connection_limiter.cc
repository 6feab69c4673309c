#include "server/connection_limiter.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/client_identity.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

// RLIMIT_NOFILE's soft limit.
size_t OpenFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 ||
      limit.rlim_cur == RLIM_INFINITY) {
    return std::numeric_limits<int>::max();
  }
  return static_cast<size_t>(limit.rlim_cur);
}

size_t Reserve(size_t reserved) {
  return reserved > 0 ? reserved : std::min<size_t>(256, OpenFileLimit() / 4);
}

size_t DescriptorCeiling(size_t reserved) {
  const size_t soft = OpenFileLimit();
  // Whatever the reserve, a handful of connections must fit.
  return std::max<size_t>(soft > reserved ? soft - reserved : 0,
                          std::min<size_t>(soft, 16));
}

bool SameSocket(int fd, dev_t device, ino_t inode) {
  struct stat now;
  return fstat(fd, &now) == 0 && S_ISSOCK(now.st_mode) &&
         now.st_dev == device && now.st_ino == inode;
}

}  // namespace

ConnectionLimiter::ConnectionLimiter(const Options& options)
    : options_(options),
      reserve_(Reserve(options.reserved_descriptors)),
      descriptor_ceiling_(DescriptorCeiling(reserve_)) {}

bool ConnectionLimiter::Admit(int fd) {
  std::string client = ClientIdentityOfSocket(fd);
  struct stat socket;
  const bool known = fstat(fd, &socket) == 0;
  absl::MutexLock lock(&mu_);
  // Without a limit reached, closed connections are still dropped from the
  // list once it has doubled.
  if (connections_.size() >= next_sweep_at_) {
    SweepLocked();
    next_sweep_at_ = std::max<size_t>(64, 2 * connections_.size());
  }
  std::string refusal = RefusalLocked(fd, client);
  if (!refusal.empty()) {
    // Closed connections may still be counted: look again.
    SweepLocked();
    refusal = RefusalLocked(fd, client);
  }
  if (!known) refusal = "its socket cannot be inspected";
  if (refusal.empty()) {
    connections_.push_back({fd, socket.st_dev, socket.st_ino, client});
    ++per_client_[client];
    return true;
  }
  ++refused_;
  // One line per power of two refusals: a flood does not flood the log.
  if ((refused_ & (refused_ - 1)) == 0) {
    spdlog::warn("refused a connection from {}: {} ({} refused so far)", client,
                 refusal, refused_);
  }
  return false;
}

std::string ConnectionLimiter::RefusalLocked(int fd,
                                             const std::string& client) {
  if (auto it = shut_out_.find(client); it != shut_out_.end()) {
    const absl::Time now = absl::Now();
    if (now < it->second) {
      return absl::StrCat(
          "the client is shut out for ",
          absl::FormatDuration(absl::Ceil(it->second - now, absl::Seconds(1))),
          " more (it cancelled too many calls before they were read: "
          "--max-client-early-cancels)");
    }
    shut_out_.erase(it);
  }
  if (fd >= 0 && static_cast<size_t>(fd) >= descriptor_ceiling_) {
    return absl::StrCat("descriptor ", fd,
                        " is in the reserve under the open-file limit "
                        "(connections get descriptors below ",
                        descriptor_ceiling_, ")");
  }
  const size_t open = connections_.size();
  if (options_.max_connections > 0 && open >= options_.max_connections) {
    return absl::StrCat(open, " connections are open (--max-connections ",
                        options_.max_connections, ")");
  }
  if (options_.max_connections_per_client > 0) {
    auto it = per_client_.find(client);
    if (it != per_client_.end() &&
        it->second >= options_.max_connections_per_client) {
      return absl::StrCat("the client holds ", it->second,
                          " connections (--max-client-connections ",
                          options_.max_connections_per_client, ")");
    }
  }
  return "";
}

size_t ConnectionLimiter::ShutOut(const std::string& client, absl::Time until) {
  absl::MutexLock lock(&mu_);
  if (shut_out_.size() >= 1024) {
    const absl::Time now = absl::Now();
    for (auto it = shut_out_.begin(); it != shut_out_.end();) {
      it = it->second <= now ? shut_out_.erase(it) : std::next(it);
    }
  }
  absl::Time& end = shut_out_[client];
  end = std::max(end, until);
  size_t shut = 0;
  for (const Connection& c : connections_) {
    if (c.client == client && SameSocket(c.fd, c.device, c.inode) &&
        shutdown(c.fd, SHUT_RDWR) == 0) {
      ++shut;
    }
  }
  return shut;
}

void ConnectionLimiter::Sweep() {
  absl::MutexLock lock(&mu_);
  SweepLocked();
}

void ConnectionLimiter::SweepLocked() {
  auto closed = [this](const Connection& c) {
    if (SameSocket(c.fd, c.device, c.inode)) return false;
    auto it = per_client_.find(c.client);
    if (it != per_client_.end() && --it->second == 0) per_client_.erase(it);
    return true;
  };
  connections_.erase(
      std::remove_if(connections_.begin(), connections_.end(), closed),
      connections_.end());
}

size_t ConnectionLimiter::open() {
  absl::MutexLock lock(&mu_);
  SweepLocked();
  return connections_.size();
}

uint64_t ConnectionLimiter::refused() const {
  absl::MutexLock lock(&mu_);
  return refused_;
}

}  // namespace gemm::server
