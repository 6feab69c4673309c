// TcpAcceptor: the server's TCP listener. It accepts connections itself and
// hands the ones it keeps to gRPC (an external connection acceptor, with
// the server's credentials), so that the server decides which connections
// it holds (ConnectionLimiter) and goes on accepting when descriptors run
// out.
//
// gRPC 1.51's own listener stops accepting for good the first time
// accept4() fails with EMFILE, and has no connection cap. Here a refused
// connection never reaches gRPC: it is told why (ConnectionRefuser) or
// closed at once; when the descriptor
// table is full, a spare descriptor is given up to accept and close the
// waiting connection (so that the backlog drains and clients see a close
// instead of a hang), and accepting goes on.
//
// Each connection is handed to gRPC on a thread of a pool (ElasticThreads),
// never on the accept loop's, through one of kHandoffs external connection
// acceptors that no other hand-off is using. gRPC 1.51 may go on reading
// the connection inside the hand-off call, on the caller's thread, for as
// long as its client keeps sending, and it holds the acceptor's lock all
// that time: a client streaming endless CONTINUATION frames held the accept
// loop that way, and no one else could connect while it sent. Now such a
// client holds one thread and one acceptor per connection it floods (at
// most kMaxHandoffsPerClient), and the others are handed off beside it.
//
// Thread-safety: Start() and Stop() from one thread; AbortHandoffs() from
// any; the accept loop runs on a thread of its own.
//
//   ASSIGN_OR_RETURN(auto acceptor, TcpAcceptor::Listen("[::]:50051",
//   &limiter)); handoffs.push_back(builder.experimental()
//   .AddExternalConnectionAcceptor(...));  // kHandoffs of them
//   ... BuildAndStart() ...; acceptor->Start(std::move(handoffs));
#ifndef GEMM_SERVER_EDGE_TCP_ACCEPTOR_H_
#define GEMM_SERVER_EDGE_TCP_ACCEPTOR_H_

#include <sys/types.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_builder.h"
#include "server/edge/connection_limiter.h"
#include "server/edge/connection_refuser.h"
#include "server/edge/elastic_threads.h"

namespace gemm::server {

class TcpAcceptor {
 public:
  using Handoff = grpc::experimental::ExternalConnectionAcceptor;
  // gRPC acceptors to hand connections to, as many hand-offs at once.
  static constexpr int kHandoffs = 256;
  // Hand-offs of one client (ClientIdentityOfSocket) running for longer
  // than kHeldAfter at once; its further connections are closed meanwhile.
  // So it takes 16 addresses flooding to hold every hand-off.
  static constexpr int kMaxHandoffsPerClient = 16;
  static constexpr absl::Duration kHeldAfter = absl::Seconds(1);

  // Binds and listens on `address` ("host:port", "[v6]:port"; port 0 picks
  // a free port): every address the host resolves to, a wildcard IPv6
  // address taking IPv4 too. `limiter` must outlive the acceptor, and so
  // must `refuser`, which tells refused clients why (null: they are
  // closed at once).
  static absl::StatusOr<std::unique_ptr<TcpAcceptor>> Listen(
      const std::string& address, ConnectionLimiter* limiter,
      ConnectionRefuser* refuser = nullptr);
  ~TcpAcceptor();  // Stop()

  // The port listened on.
  int port() const { return port_; }

  // Starts accepting, handing connections to `handoffs` (gRPC's, from a
  // server that has started; at least one).
  void Start(std::vector<std::unique_ptr<Handoff>> handoffs);
  // Stops accepting and closes the listening sockets; connections accepted
  // and not yet handed over are closed, those handed over are gRPC's. A
  // hand-off still running goes on; the destructor waits for it.
  void Stop();
  // Shuts down (shutdown(2)) the sockets of the hand-offs still running
  // and disconnects them (connect(2) to AF_UNSPEC: the bytes received and
  // not yet read are dropped, and the client gets a reset), so that gRPC's
  // read loop inside them ends, rather than going on through what its
  // client had already sent; returns how many. For a
  // server shutting down past its grace period: gRPC's Server::Shutdown
  // waits for every acceptor's lock, which a running hand-off holds for as
  // long as its client keeps sending.
  size_t AbortHandoffs();

  // Connections that could not be accepted for want of descriptors.
  uint64_t dropped_for_descriptors() const { return dropped_.load(); }

  // Hand-offs running now; those running for over kHeldAfter (a client
  // keeping gRPC reading inside them: a CONTINUATION flood); the time
  // spent in hand-offs so far, running ones included (microseconds a
  // connection normally; a flood adds about a second a second);
  // connections closed instead of handed off (a client at
  // kMaxHandoffsPerClient held hand-offs, or the queue full).
  struct HandoffCounts {
    size_t running = 0;
    size_t held = 0;
    double seconds = 0;
    uint64_t closed = 0;
  };
  HandoffCounts handoff_counts();

 private:
  TcpAcceptor(std::vector<int> listeners, int port, ConnectionLimiter* limiter,
              ConnectionRefuser* refuser);
  void AcceptLoop();
  // Accepts and closes one waiting connection on `listener` with the spare
  // descriptor, when the table is full.
  void DropOne(int listener);
  // Hands the accepted socket `fd` to gRPC on a pool thread.
  void HandOff(int listener, int fd);

  std::vector<int> listeners_;
  const int port_;
  ConnectionLimiter* const limiter_;
  ConnectionRefuser* const refuser_;
  std::vector<std::unique_ptr<Handoff>> handoffs_;
  absl::Mutex handoff_mutex_;
  // The acceptors no hand-off is using now. The pool has at most as many
  // threads as there are acceptors, so a task always finds one.
  std::vector<Handoff*> free_handoffs_ ABSL_GUARDED_BY(handoff_mutex_);
  // The hand-offs running: their sockets, for AbortHandoffs(), and their
  // clients and start, for kMaxHandoffsPerClient.
  struct RunningSocket {
    int fd;
    ino_t inode;
    std::string client;
    absl::Time since;
  };
  std::map<uint64_t, RunningSocket> running_ ABSL_GUARDED_BY(handoff_mutex_);
  uint64_t next_handoff_id_ ABSL_GUARDED_BY(handoff_mutex_) = 0;
  // Time spent in hand-offs that have ended.
  absl::Duration handoff_time_ ABSL_GUARDED_BY(handoff_mutex_);
  bool stopping_ ABSL_GUARDED_BY(handoff_mutex_) = false;
  // Written to by Stop() to wake the loop.
  int wake_[2] = {-1, -1};
  // Kept open to be given up when descriptors run out.
  int spare_ = -1;
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> handoffs_dropped_{0};
  std::thread thread_;
  // Made by Start(); reset first by the destructor, which waits there for
  // the running hand-offs.
  std::unique_ptr<ElasticThreads> handoff_threads_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_EDGE_TCP_ACCEPTOR_H_
