#include "server/edge/connection_limiter.h"

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/edge/client_identity.h"
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

// A connection's address and port: "ADDRESS PORT", the address as
// ClientIdentityOf* names it; from the socket or from gRPC's peer name.
std::string ConnectionKeyOfSocket(int fd) {
  sockaddr_storage address;
  socklen_t length = sizeof(address);
  int port = 0;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    if (address.ss_family == AF_INET) {
      port = ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
    } else if (address.ss_family == AF_INET6) {
      port = ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
    }
  }
  return absl::StrCat(ClientIdentityOfSocket(fd), " ", port);
}

std::string ConnectionKeyOfPeer(absl::string_view peer) {
  const size_t colon = peer.rfind(':');
  absl::string_view port =
      colon == absl::string_view::npos ? "" : peer.substr(colon + 1);
  return absl::StrCat(ClientIdentityOfPeer(peer), " ", port);
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

bool ConnectionLimiter::Admit(int fd, std::string* refusal_out,
                              bool* answerable) {
  std::string client = ClientIdentityOfSocket(fd);
  std::string key = ConnectionKeyOfSocket(fd);
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
    // A claim left by a closed connection of the same address and port,
    // not yet swept, is not this one's.
    ForgetClaimLocked(key);
    ++open_keys_[key];
    connections_.push_back(
        {fd, socket.st_dev, socket.st_ino, client, std::move(key)});
    ++per_client_[client];
    return true;
  }
  ++refused_;
  if (answerable != nullptr) {
    *answerable = known && shut_out_.count(client) == 0 &&
                  static_cast<size_t>(fd) < descriptor_ceiling_;
  }
  if (refusal_out != nullptr) *refusal_out = refusal;
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
    const size_t cap = ClientCap(options_.max_connections_per_client);
    auto it = per_client_.find(client);
    if (it != per_client_.end() && it->second >= cap) {
      return absl::StrCat(client, " holds ", it->second, " connections (",
                          CapText(options_.max_connections_per_client,
                                  options_.per_client_flag),
                          ")");
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

size_t ConnectionLimiter::ClientCap(size_t configured) const {
  size_t capacity = descriptor_ceiling_;
  if (options_.max_connections > 0) {
    capacity = std::min(capacity, options_.max_connections);
  }
  return std::min(configured, std::max<size_t>(1, capacity / 2));
}

std::string ConnectionLimiter::CapText(size_t configured,
                                       const std::string& flag) const {
  const size_t cap = ClientCap(configured);
  if (cap == configured) return absl::StrCat(flag, " ", configured);
  return absl::StrCat(flag, " ", configured, ", held to half of the ", 2 * cap,
                      " connections the server can hold");
}

absl::Status ConnectionLimiter::ClaimForIdentity(absl::string_view peer,
                                                 const std::string& identity) {
  if (options_.max_connections_per_identity == 0) return absl::OkStatus();
  const std::string key = ConnectionKeyOfPeer(peer);
  const size_t cap = ClientCap(options_.max_connections_per_identity);
  absl::MutexLock lock(&mu_);
  if (identity_of_.count(key) > 0) return absl::OkStatus();
  if (open_keys_.count(key) == 0) return absl::OkStatus();  // not ours
  auto held = [&] {
    auto it = per_identity_.find(identity);
    return it == per_identity_.end() ? size_t{0} : it->second;
  };
  const absl::Time now = absl::Now();
  auto refused = refused_claims_.find(key);
  // A connection refused lately is refused again without a look at the
  // others, so that a client calling on it costs a lookup; once a second
  // it is weighed again, after a sweep (closed connections may still be
  // counted).
  const bool fresh =
      refused != refused_claims_.end() && now - refused->second < kReclaimAfter;
  if (!fresh && held() >= cap && now - last_sweep_ >= kReclaimAfter) {
    SweepLocked();
    if (open_keys_.count(key) == 0) return absl::OkStatus();
  }
  if (fresh || held() >= cap) {
    if (!fresh) refused_claims_[key] = now;
    return absl::ResourceExhaustedError(
        absl::StrCat("client '", identity, "' holds ", held(), " connections (",
                     CapText(options_.max_connections_per_identity,
                             "--max-client-connections"),
                     "); this one is refused its calls"));
  }
  ++per_identity_[identity];
  identity_of_[key] = identity;
  refused_claims_.erase(key);
  return absl::OkStatus();
}

void ConnectionLimiter::ForgetClaimLocked(const std::string& key) {
  refused_claims_.erase(key);
  auto claimed = identity_of_.find(key);
  if (claimed == identity_of_.end()) return;
  auto count = per_identity_.find(claimed->second);
  if (count != per_identity_.end() && --count->second == 0) {
    per_identity_.erase(count);
  }
  identity_of_.erase(claimed);
}

void ConnectionLimiter::Sweep() {
  absl::MutexLock lock(&mu_);
  SweepLocked();
}

void ConnectionLimiter::SweepLocked() {
  last_sweep_ = absl::Now();
  auto closed = [this](const Connection& c) {
    if (SameSocket(c.fd, c.device, c.inode)) return false;
    auto it = per_client_.find(c.client);
    if (it != per_client_.end() && --it->second == 0) per_client_.erase(it);
    auto open = open_keys_.find(c.key);
    if (open != open_keys_.end() && --open->second == 0) {
      open_keys_.erase(open);
      ForgetClaimLocked(c.key);
    }
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
