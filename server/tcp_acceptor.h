// TcpAcceptor: the server's TCP listener. It accepts connections itself and
// hands the ones it keeps to gRPC (an external connection acceptor, with
// the server's credentials), so that the server decides which connections
// it holds (ConnectionLimiter) and goes on accepting when descriptors run
// out.
//
// gRPC 1.51's own listener stops accepting for good the first time
// accept4() fails with EMFILE, and has no connection cap. Here a refused
// connection is closed at once, before gRPC sees it; when the descriptor
// table is full, a spare descriptor is given up to accept and close the
// waiting connection (so that the backlog drains and clients see a close
// instead of a hang), and accepting goes on.
//
// Thread-safety: Start() and Stop() from one thread; the accept loop runs
// on a thread of its own.
//
//   ASSIGN_OR_RETURN(auto acceptor, TcpAcceptor::Listen("[::]:50051",
//   &limiter)); auto handoff =
//   builder.experimental().AddExternalConnectionAcceptor(...);
//   ... BuildAndStart() ...; acceptor->Start(std::move(handoff));
#ifndef GEMM_SERVER_TCP_ACCEPTOR_H_
#define GEMM_SERVER_TCP_ACCEPTOR_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/server_builder.h"
#include "server/connection_limiter.h"

namespace gemm::server {

class TcpAcceptor {
 public:
  // Binds and listens on `address` ("host:port", "[v6]:port"; port 0 picks
  // a free port): every address the host resolves to, a wildcard IPv6
  // address taking IPv4 too. `limiter` must outlive the acceptor.
  static absl::StatusOr<std::unique_ptr<TcpAcceptor>> Listen(
      const std::string& address, ConnectionLimiter* limiter);
  ~TcpAcceptor();  // Stop()

  // The port listened on.
  int port() const { return port_; }

  // Starts accepting, handing connections to `handoff` (gRPC's, from a
  // server that has started).
  void Start(
      std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> handoff);
  // Stops accepting and closes the listening sockets; connections already
  // handed over are gRPC's.
  void Stop();

  // Connections that could not be accepted for want of descriptors.
  uint64_t dropped_for_descriptors() const { return dropped_.load(); }

 private:
  TcpAcceptor(std::vector<int> listeners, int port, ConnectionLimiter* limiter);
  void AcceptLoop();
  // Accepts and closes one waiting connection on `listener` with the spare
  // descriptor, when the table is full.
  void DropOne(int listener);

  std::vector<int> listeners_;
  const int port_;
  ConnectionLimiter* const limiter_;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> handoff_;
  // Written to by Stop() to wake the loop.
  int wake_[2] = {-1, -1};
  // Kept open to be given up when descriptors run out.
  int spare_ = -1;
  std::atomic<uint64_t> dropped_{0};
  std::thread thread_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_TCP_ACCEPTOR_H_
