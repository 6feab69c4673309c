#include "server/edge/tcp_acceptor.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/edge/client_identity.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

// "host:port" or "[v6]:port" split; false when it is neither.
bool SplitHostPort(absl::string_view address, std::string* host,
                   std::string* port) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return false;
  absl::string_view h = address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') {
    h = h.substr(1, h.size() - 2);
  }
  *host = std::string(h);
  *port = std::string(address.substr(colon + 1));
  int number = 0;
  return absl::SimpleAtoi(*port, &number) && number >= 0 && number < 65536;
}

int BoundPort(int fd) {
  sockaddr_storage address;
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return 0;
  }
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
}

void SetPort(sockaddr* address, int port) {
  if (address->sa_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(address)->sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6*>(address)->sin6_port = htons(port);
  }
}

// A listening socket on `address`, or -1 with errno set.
int ListenOn(const addrinfo& address, int port) {
  const int fd = socket(address.ai_family,
                        address.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        address.ai_protocol);
  if (fd < 0) return -1;
  const int on = 1, off = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  // Accepted sockets inherit it: small messages leave at once.
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  if (address.ai_family == AF_INET6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
  }
  sockaddr_storage bound;
  std::memcpy(&bound, address.ai_addr, address.ai_addrlen);
  SetPort(reinterpret_cast<sockaddr*>(&bound), port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&bound), address.ai_addrlen) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    const int error = errno;
    close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

// A socket descriptor, closed unless released.
class OwnedSocket {
 public:
  explicit OwnedSocket(int fd) : fd_(fd) {}
  OwnedSocket(OwnedSocket&& other) : fd_(std::exchange(other.fd_, -1)) {}
  OwnedSocket& operator=(OwnedSocket&&) = delete;
  ~OwnedSocket() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TcpAcceptor>> TcpAcceptor::Listen(
    const std::string& address, ConnectionLimiter* limiter,
    ConnectionRefuser* refuser) {
  std::string host, port_text;
  if (!SplitHostPort(address, &host, &port_text)) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address \"", address, "\" is not host:port"));
  }
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int resolved = getaddrinfo(host.empty() ? nullptr : host.c_str(),
                                   port_text.c_str(), &hints, &found);
  if (resolved != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot resolve \"", host, "\": ", gai_strerror(resolved)));
  }
  // A wildcard IPv6 socket takes IPv4 as well: listen on it alone when the
  // host resolves to both wildcards.
  bool has_v6_any = false;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family != AF_INET6) continue;
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
    has_v6_any |= IN6_IS_ADDR_UNSPECIFIED(&v6->sin6_addr);
  }
  std::vector<int> listeners;
  int port = 0;
  std::string error;
  absl::SimpleAtoi(port_text, &port);
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
    if (a->ai_family == AF_INET && has_v6_any &&
        reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr ==
            htonl(INADDR_ANY)) {
      continue;
    }
    const int fd = ListenOn(*a, port);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    // Port 0: every address gets the port the first one got.
    if (port == 0) port = BoundPort(fd);
    listeners.push_back(fd);
  }
  freeaddrinfo(found);
  // A host without IPv6 cannot take "[::]": its IPv4 wildcard then, as
  // gRPC's own listener does.
  if (listeners.empty() && (host == "::" || host.empty())) {
    return Listen(absl::StrCat("0.0.0.0:", port_text), limiter, refuser);
  }
  if (listeners.empty()) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", address, ": ", error));
  }
  return std::unique_ptr<TcpAcceptor>(
      new TcpAcceptor(std::move(listeners), port, limiter, refuser));
}

TcpAcceptor::TcpAcceptor(std::vector<int> listeners, int port,
                         ConnectionLimiter* limiter, ConnectionRefuser* refuser)
    : listeners_(std::move(listeners)),
      port_(port),
      limiter_(limiter),
      refuser_(refuser) {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
  spare_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

TcpAcceptor::~TcpAcceptor() {
  Stop();
  handoff_threads_.reset();
  for (int fd : {wake_[0], wake_[1], spare_}) {
    if (fd >= 0) close(fd);
  }
}

void TcpAcceptor::Start(std::vector<std::unique_ptr<Handoff>> handoffs) {
  handoffs_ = std::move(handoffs);
  {
    absl::MutexLock lock(&handoff_mutex_);
    for (auto& handoff : handoffs_) free_handoffs_.push_back(handoff.get());
  }
  handoff_threads_ = std::make_unique<ElasticThreads>(
      ElasticThreads::Options{.max_threads = handoffs_.size(),
                              .max_queued = 1024,
                              .idle_exit = absl::Seconds(10),
                              .name = "gemm-handoff"});
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "gemm-accept");
    AcceptLoop();
  });
}

void TcpAcceptor::Stop() {
  {
    absl::MutexLock lock(&handoff_mutex_);
    stopping_ = true;
  }
  if (thread_.joinable()) {
    const char byte = 0;
    if (write(wake_[1], &byte, 1) < 0) {
      // The pipe is full only if a wake-up is pending already.
    }
    thread_.join();
  }
  // Connections accepted and not yet handed off are closed.
  if (handoff_threads_ != nullptr) handoff_threads_->Close();
  for (int fd : listeners_) close(fd);
  listeners_.clear();
}

void TcpAcceptor::AcceptLoop() {
  std::vector<pollfd> polled;
  for (int fd : listeners_) polled.push_back({fd, POLLIN, 0});
  polled.push_back({wake_[0], POLLIN, 0});
  while (true) {
    if (poll(polled.data(), polled.size(), -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("listener: poll failed: {}", std::strerror(errno));
      absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    if (polled.back().revents != 0) return;
    for (size_t i = 0; i + 1 < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      // Take what is waiting, a bounded number at a time so that every
      // listener and the wake-up get their turn.
      for (int taken = 0; taken < 64; ++taken) {
        const int fd = accept4(polled[i].fd, nullptr, nullptr,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
          std::string refusal;
          bool answerable = false;
          if (!limiter_->Admit(fd, &refusal, &answerable)) {
            if (refuser_ != nullptr && answerable) {
              refuser_->Refuse(fd, refusal, ClientIdentityOfSocket(fd));
            } else {
              close(fd);
            }
            continue;
          }
          HandOff(polled[i].fd, fd);
          continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE) {
          DropOne(polled[i].fd);
          continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          // ENOBUFS, ENOMEM and the like: wait a little, then go on.
          spdlog::warn("listener: accept failed: {}", std::strerror(errno));
          absl::SleepFor(absl::Milliseconds(10));
        }
        break;
      }
    }
  }
}

void TcpAcceptor::HandOff(int listener, int fd) {
  std::string client = ClientIdentityOfSocket(fd);
  {
    absl::MutexLock lock(&handoff_mutex_);
    // Hand-offs that return at once (most: gRPC reads on its own threads)
    // do not count; ones held past kHeldAfter are a client that keeps gRPC
    // reading inside them.
    const absl::Time held_since = absl::Now() - kHeldAfter;
    int held = 0;
    for (const auto& [id, running] : running_) {
      held += running.client == client && running.since < held_since;
    }
    if (held >= kMaxHandoffsPerClient) {
      close(fd);
      const uint64_t dropped = handoffs_dropped_.fetch_add(1) + 1;
      if ((dropped & (dropped - 1)) == 0) {
        spdlog::warn(
            "listener: client {} holds {} connections in gRPC's hand-off (a "
            "flood?); closed a new one ({} closed so far)",
            client, held, dropped);
      }
      return;
    }
  }
  // The task owns the socket until gRPC has it: dropped unrun (the pool
  // closed, or its queue full), it closes the socket.
  auto task = [this, listener, socket = OwnedSocket(fd),
               client = std::move(client)]() mutable {
    struct stat status;
    const ino_t inode =
        fstat(socket.fd(), &status) == 0 ? status.st_ino : ino_t{0};
    Handoff* handoff;
    uint64_t id;
    {
      absl::MutexLock lock(&handoff_mutex_);
      // After Stop() the connection is closed (by `socket`) instead: gRPC
      // may be shutting down, and would not close it then. Never empty
      // while the pool keeps to its cap.
      if (stopping_ || free_handoffs_.empty()) return;
      handoff = free_handoffs_.back();
      free_handoffs_.pop_back();
      id = next_handoff_id_++;
      running_[id] = {socket.fd(), inode, std::move(client), absl::Now()};
    }
    Handoff::NewConnectionParameters connection;
    connection.listener_fd = listener;
    connection.fd = socket.Release();
    handoff->HandleNewConnection(&connection);
    absl::MutexLock lock(&handoff_mutex_);
    handoff_time_ += absl::Now() - running_[id].since;
    running_.erase(id);
    free_handoffs_.push_back(handoff);
  };
  if (!handoff_threads_->Run(std::move(task))) {
    const uint64_t dropped = handoffs_dropped_.fetch_add(1) + 1;
    if ((dropped & (dropped - 1)) == 0) {
      spdlog::warn(
          "listener: {} connections wait to be handed to gRPC; closed a new "
          "one ({} so far)",
          handoff_threads_->queued(), dropped);
    }
  }
}

TcpAcceptor::HandoffCounts TcpAcceptor::handoff_counts() {
  HandoffCounts counts;
  counts.closed = handoffs_dropped_.load();
  absl::MutexLock lock(&handoff_mutex_);
  const absl::Time now = absl::Now();
  absl::Duration time = handoff_time_;
  counts.running = running_.size();
  for (const auto& [id, running] : running_) {
    counts.held += running.since < now - kHeldAfter;
    time += now - running.since;
  }
  counts.seconds = absl::ToDoubleSeconds(time);
  return counts;
}

size_t TcpAcceptor::AbortHandoffs() {
  absl::MutexLock lock(&handoff_mutex_);
  size_t aborted = 0;
  for (const auto& [id, socket] : running_) {
    // The descriptor is gRPC's: it may have closed it, and the number may
    // have been reused; only the socket handed over is shut down.
    struct stat status;
    if (fstat(socket.fd, &status) != 0 || !S_ISSOCK(status.st_mode) ||
        status.st_ino != socket.inode) {
      continue;
    }
    if (shutdown(socket.fd, SHUT_RDWR) == 0) ++aborted;
    sockaddr unspecified = {};
    unspecified.sa_family = AF_UNSPEC;
    connect(socket.fd, &unspecified, sizeof(unspecified));
  }
  return aborted;
}

void TcpAcceptor::DropOne(int listener) {
  const uint64_t dropped = dropped_.fetch_add(1) + 1;
  if ((dropped & (dropped - 1)) == 0) {
    spdlog::warn(
        "listener: out of file descriptors; closing a new connection at once "
        "({} so far)",
        dropped);
  }
  if (spare_ >= 0) {
    close(spare_);
    const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) close(fd);
    spare_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  // Give the rest of the process a moment to close something.
  absl::SleepFor(absl::Milliseconds(1));
}

}  // namespace gemm::server
