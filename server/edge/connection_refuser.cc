#include "server/edge/connection_refuser.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "absl/time/clock.h"

namespace gemm::server {
namespace {

// HTTP/2 (RFC 9113) frame types and flags.
constexpr uint8_t kHeaders = 0x1, kRstStream = 0x3, kSettings = 0x4,
                  kGoAway = 0x7;
constexpr uint8_t kEndStream = 0x1, kEndHeaders = 0x4, kAck = 0x1;
constexpr uint32_t kEnhanceYourCalm = 0xb;
constexpr char kClientPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr size_t kClientPrefaceBytes = sizeof(kClientPreface) - 1;
// Frames larger than the default SETTINGS_MAX_FRAME_SIZE end the exchange.
constexpr size_t kMaxFrame = 16384;

void Put32(std::string& out, uint32_t v) {
  out.push_back(static_cast<char>(v >> 24));
  out.push_back(static_cast<char>(v >> 16));
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

std::string Frame(uint8_t type, uint8_t flags, uint32_t stream,
                  const std::string& payload) {
  std::string out;
  const size_t n = payload.size();
  out.push_back(static_cast<char>(n >> 16));
  out.push_back(static_cast<char>(n >> 8));
  out.push_back(static_cast<char>(n));
  out.push_back(static_cast<char>(type));
  out.push_back(static_cast<char>(flags));
  Put32(out, stream & 0x7fffffffu);
  return out + payload;
}

// An HPACK string literal, not Huffman-coded (RFC 7541 5.2).
void PutString(std::string& out, const std::string& s) {
  size_t n = s.size();
  if (n < 127) {
    out.push_back(static_cast<char>(n));
  } else {
    out.push_back(static_cast<char>(127));
    n -= 127;
    while (n >= 128) {
      out.push_back(static_cast<char>((n & 0x7f) | 0x80));
      n >>= 7;
    }
    out.push_back(static_cast<char>(n));
  }
  out += s;
}

// grpc-message's percent-encoding: printable ASCII but '%' as is.
std::string PercentEncode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

// False when not all of `bytes` went: a full buffer (a client that does not
// read) or a gone peer. The frames after a cut one would not parse, so the
// caller closes the socket.
bool SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n =
        send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string ConnectionRefuser::ServerPreface() {
  return Frame(kSettings, 0, 0, "");
}

std::string ConnectionRefuser::RefusedCall(uint32_t stream_id,
                                           const std::string& reason) {
  std::string block;
  block.push_back(static_cast<char>(0x88));  // :status 200 (static index 8)
  // content-type (static name 31), literal without indexing.
  block.push_back(static_cast<char>(0x0f));
  block.push_back(static_cast<char>(31 - 15));
  PutString(block, "application/grpc");
  block.push_back(0);  // literal without indexing, new name
  PutString(block, "grpc-status");
  PutString(block, "8");  // RESOURCE_EXHAUSTED
  block.push_back(0);
  PutString(block, "grpc-message");
  // Well inside a frame, and gRPC's metadata limit.
  PutString(block, PercentEncode("gemm-server refused the connection: " +
                                 reason.substr(0, kMaxReasonBytes)));
  // The answer ends the call; RST_STREAM (NO_ERROR) tells a client still
  // sending its request to stop (RFC 9113, 8.1).
  std::string code;
  Put32(code, 0);
  return Frame(kHeaders, kEndStream | kEndHeaders, stream_id, block) +
         Frame(kRstStream, 0, stream_id, code);
}

std::string ConnectionRefuser::GoAway(uint32_t last_stream_id,
                                      const std::string& reason) {
  std::string payload;
  Put32(payload, last_stream_id & 0x7fffffffu);
  Put32(payload, kEnhanceYourCalm);
  payload += reason.substr(0, kMaxReasonBytes);
  return Frame(kGoAway, 0, 0, payload);
}

ConnectionRefuser::ConnectionRefuser() {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    // No way to wake a loop: no loop; every refused socket is closed.
    wake_[0] = wake_[1] = -1;
    return;
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "gemm-refuser");
    Loop();
  });
}

ConnectionRefuser::~ConnectionRefuser() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) {
    Wake();
    thread_.join();
  }
  // The loop has returned: what it held, and what it never took, is closed.
  for (auto& [fd, pending] : pending_) close(fd);
  for (const Incoming& in : incoming_) close(in.fd);
  for (int fd : wake_) {
    if (fd >= 0) close(fd);
  }
}

void ConnectionRefuser::Wake() {
  const char byte = 0;
  if (write(wake_[1], &byte, 1) < 0) {
    // Full: a wake-up is pending already.
  }
}

void ConnectionRefuser::Refuse(int fd, const std::string& reason,
                               const std::string& client) {
  {
    absl::MutexLock lock(&mu_);
    int& from_here = held_by_client_[client];
    if (!stopping_ && wake_[1] >= 0 && held_ < kMaxPending &&
        from_here < kMaxPendingPerClient) {
      ++held_;
      ++from_here;
      ++answered_;
      incoming_.push_back({fd, reason, client});
    } else {
      if (from_here == 0) held_by_client_.erase(client);
      ++closed_at_once_;
      close(fd);
      return;
    }
  }
  Wake();
}

uint64_t ConnectionRefuser::answered() const {
  absl::MutexLock lock(&mu_);
  return answered_;
}

uint64_t ConnectionRefuser::closed_at_once() const {
  absl::MutexLock lock(&mu_);
  return closed_at_once_;
}

bool ConnectionRefuser::Serve(int fd, Pending& p) {
  char buffer[16384];
  std::string out;
  // A bounded read per wake-up, so that a client that keeps sending holds
  // the loop no longer than another.
  bool open = true;
  for (int reads = 0; reads < 4; ++reads) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) {
      open = false;  // the client closed its end; it may still read
      break;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return false;
    }
    if (p.goaway_sent) continue;  // drained until the client closes
    p.in.append(buffer, static_cast<size_t>(n));
    if (!Frames(p, out)) {
      open = false;
      break;
    }
  }
  // What was answered goes out, even to a client that has closed its end.
  if (!out.empty() && !SendAll(fd, out)) return false;
  if (!open) return false;
  if (!p.goaway_sent && p.calls_answered >= kMaxCallsAnswered) {
    // A client that starts call after call on a refused connection gets
    // its answer kMaxCallsAnswered times, then the connection goes.
    return SendGoAway(fd, p);
  }
  return true;
}

bool ConnectionRefuser::SendGoAway(int fd, Pending& p) {
  p.goaway_sent = true;
  if (!SendAll(fd, GoAway(p.last_stream, p.reason))) return false;
  // Its end closed, not the socket: bytes the client still sends are read
  // and dropped, as a close with unread bytes resets the connection, and
  // the client may lose the answers with it.
  shutdown(fd, SHUT_WR);
  return true;
}

bool ConnectionRefuser::Frames(Pending& p, std::string& out) {
  if (!p.preface_seen) {
    if (p.in.size() < kClientPrefaceBytes) return true;
    if (p.in.compare(0, kClientPrefaceBytes, kClientPreface) != 0) {
      return false;  // not HTTP/2: nothing it would read
    }
    p.in.erase(0, kClientPrefaceBytes);
    p.preface_seen = true;
  }
  size_t at = 0;
  while (p.in.size() - at >= 9) {
    const auto byte = [&p, at](size_t i) {
      return static_cast<uint32_t>(static_cast<unsigned char>(p.in[at + i]));
    };
    const size_t length = (byte(0) << 16) | (byte(1) << 8) | byte(2);
    if (length > kMaxFrame) return false;
    if (p.in.size() - at < 9 + length) break;
    const uint8_t type = static_cast<uint8_t>(byte(3));
    const uint8_t flags = static_cast<uint8_t>(byte(4));
    const uint32_t stream =
        ((byte(5) << 24) | (byte(6) << 16) | (byte(7) << 8) | byte(8)) &
        0x7fffffffu;
    if (type == kSettings && (flags & kAck) == 0) {
      out += Frame(kSettings, kAck, 0, "");
    } else if (type == kHeaders && stream % 2 == 1 && stream > p.last_stream &&
               p.calls_answered < kMaxCallsAnswered) {
      out += RefusedCall(stream, p.reason);
      p.last_stream = stream;
      p.last_answer = absl::Now();
      ++p.calls_answered;
    }
    at += 9 + length;
  }
  p.in.erase(0, at);
  return true;
}

void ConnectionRefuser::Loop() {
  std::vector<pollfd> polled;
  std::vector<Incoming> arrived;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      arrived.swap(incoming_);
    }
    const absl::Time now = absl::Now();
    std::vector<std::string> gone;  // the clients of sockets closed
    auto drop = [this, &gone](std::map<int, Pending>::iterator it) {
      close(it->first);
      gone.push_back(std::move(it->second.client));
      return pending_.erase(it);
    };
    for (Incoming& in : arrived) {
      Pending& p = pending_[in.fd];
      p.reason = std::move(in.reason);
      p.client = std::move(in.client);
      p.deadline = now + kLinger;
      if (!SendAll(in.fd, ServerPreface())) drop(pending_.find(in.fd));
    }
    arrived.clear();
    absl::Time next = absl::InfiniteFuture();
    polled.clear();
    for (auto it = pending_.begin(); it != pending_.end();) {
      Pending& p = it->second;
      if (!p.goaway_sent && p.last_answer + kQuietBeforeGoAway <= now) {
        // Every call it started is answered, and it has started no other
        // for a while: the connection goes.
        if (!SendGoAway(it->first, p)) {
          it = drop(it);
          continue;
        }
        p.deadline = std::min(p.deadline, now + kQuietBeforeGoAway);
      }
      if (p.deadline <= now) {
        // The client did not close its end in time (or sent no call).
        if (!p.goaway_sent) SendGoAway(it->first, p);
        it = drop(it);
        continue;
      }
      next = std::min(next, p.deadline);
      if (!p.goaway_sent) {
        next = std::min(next, p.last_answer + kQuietBeforeGoAway);
      }
      polled.push_back({it->first, POLLIN, 0});
      ++it;
    }
    polled.push_back({wake_[0], POLLIN, 0});
    const int timeout_ms =
        next == absl::InfiniteFuture()
            ? -1
            : static_cast<int>(std::max<int64_t>(
                  1, absl::ToInt64Milliseconds(next - absl::Now()) + 1));
    if (poll(polled.data(), polled.size(), timeout_ms) < 0 && errno != EINTR) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    if (polled.back().revents != 0) {
      char drain[64];
      while (read(wake_[0], drain, sizeof(drain)) > 0) {
      }
    }
    for (size_t i = 0; i + 1 < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      auto it = pending_.find(polled[i].fd);
      if (it == pending_.end()) continue;
      if (!Serve(it->first, it->second)) drop(it);
    }
    if (!gone.empty()) {
      absl::MutexLock lock(&mu_);
      held_ -= gone.size();
      for (const std::string& client : gone) {
        auto held = held_by_client_.find(client);
        if (held != held_by_client_.end() && --held->second <= 0) {
          held_by_client_.erase(held);
        }
      }
    }
  }
}

}  // namespace gemm::server
