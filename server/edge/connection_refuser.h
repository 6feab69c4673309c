// ConnectionRefuser: tells a client whose connection the server refuses
// (ConnectionLimiter) why, in HTTP/2 a gRPC client reads, instead of a bare
// close that gRPC reports as "Socket closed" or "failed to connect".
//
// The refused socket is answered on a thread of its own: the server's
// SETTINGS, then each call the client starts on the connection (HEADERS)
// gets a trailers-only response with grpc-status RESOURCE_EXHAUSTED and the
// reason as grpc-message ("127.0.0.1 holds 1024 connections
// (--max-client-connections 1024)"); once it has started no call for
// kQuietBeforeGoAway, GOAWAY (ENHANCE_YOUR_CALM, the reason as its debug
// data), and the socket is closed once the client has closed its end, or
// at kLinger after it was accepted. Nothing the client sends is decoded but
// the frame headers.
//
// Bounded, so that refusing a flood costs little: at most kMaxPending
// sockets are answered at once (kMaxPendingPerClient from one address),
// each for at most kLinger and kMaxCallsAnswered calls; a socket refused
// beyond that, or whose descriptor is in the reserve, is closed at once, and
// so is one that does not take what it is sent.
// Plaintext listeners only: under TLS a refused socket is closed.
//
// Thread-safety: Refuse() from any thread; the sockets are answered on the
// refuser's own thread, which holds no lock while it reads or writes them,
// and reads at most 64 KiB of one socket per turn.
//
//   ConnectionRefuser refuser;
//   std::string why;
//   if (!limiter.Admit(fd, &why)) refuser.Refuse(fd, why);
#ifndef GEMM_SERVER_EDGE_CONNECTION_REFUSER_H_
#define GEMM_SERVER_EDGE_CONNECTION_REFUSER_H_

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gemm::server {

class ConnectionRefuser {
 public:
  static constexpr size_t kMaxPending = 64;
  // Of them, from one client address.
  static constexpr int kMaxPendingPerClient = 8;
  // Calls answered on one connection; past them, GOAWAY at once.
  static constexpr int kMaxCallsAnswered = 8;
  // The reason is cut to this many bytes.
  static constexpr size_t kMaxReasonBytes = 1024;
  static constexpr absl::Duration kLinger = absl::Seconds(2);
  // GOAWAY once the client has started no call for this long.
  static constexpr absl::Duration kQuietBeforeGoAway = absl::Milliseconds(200);

  ConnectionRefuser();
  ~ConnectionRefuser();  // closes the sockets still pending

  // Takes `fd` (a socket just accepted, non-blocking, from `client`, its
  // address) and answers it with `reason`; closes it at once when
  // kMaxPending are pending, or kMaxPendingPerClient from `client`, or the
  // refuser is stopping.
  void Refuse(int fd, const std::string& reason, const std::string& client);

  // Sockets answered, and closed at once, so far.
  uint64_t answered() const;
  uint64_t closed_at_once() const;

  // The bytes a refused connection is sent before any call (SETTINGS), for
  // each call (stream `stream_id`) and at the end (GOAWAY after
  // `last_stream_id`). For tests.
  static std::string ServerPreface();
  static std::string RefusedCall(uint32_t stream_id, const std::string& reason);
  static std::string GoAway(uint32_t last_stream_id, const std::string& reason);

 private:
  struct Incoming {
    int fd;
    std::string reason, client;
  };
  struct Pending {
    std::string reason, client;
    int calls_answered = 0;
    absl::Time deadline;
    std::string in;  // bytes read and not yet framed
    bool preface_seen = false;
    uint32_t last_stream = 0;
    // When its last call was answered; InfiniteFuture before the first.
    absl::Time last_answer = absl::InfiniteFuture();
    bool goaway_sent = false;
  };

  void Loop();
  void Wake();
  // Reads what `fd` has; answers; false when it is done with.
  bool Serve(int fd, Pending& pending);
  // GOAWAY after the last call answered, and the socket's end closed;
  // false when the socket took not all of it (to be closed).
  static bool SendGoAway(int fd, Pending& pending);
  // Takes the whole frames of pending.in, adding the answers to `out`;
  // false when the bytes are not HTTP/2 a client would send.
  static bool Frames(Pending& pending, std::string& out);

  mutable absl::Mutex mu_;
  // Sockets refused and not yet taken by the loop, with their reasons.
  std::vector<Incoming> incoming_ ABSL_GUARDED_BY(mu_);
  // Sockets the refuser holds, incoming and pending, in all and by client.
  size_t held_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> held_by_client_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The loop thread's own (and the destructor's, once it has returned).
  std::map<int, Pending> pending_;
  uint64_t answered_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t closed_at_once_ ABSL_GUARDED_BY(mu_) = 0;
  int wake_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_EDGE_CONNECTION_REFUSER_H_
