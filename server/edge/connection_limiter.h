// ConnectionLimiter: bounds the connections the server holds, in all and
// per client (ClientIdentityOfSocket), for the server's own acceptor
// (tcp_acceptor.h), which closes a refused connection at once.
//
// A connection is refused when the client already holds
// max_connections_per_client (counted by address at accept; at most half
// of the connections the server can hold, ClientCap), when
// max_connections are open, or when its
// descriptor number reaches the open-file limit less a reserve: the kernel
// hands out the lowest free descriptor, so a high number means the table is
// nearly full, and the reserve keeps descriptors free for everything else
// the process opens.
//
// Where callers are known by more than their address (tokens, client
// certificates), max_connections_per_identity counts a caller's connections
// by its identity instead, at the first call on each (ClaimForIdentity):
// clients behind one NAT or load balancer share an address, not a cap.
//
// A client can be shut out (ShutOut): its connections are closed under
// gRPC (shutdown(2), so gRPC sees the peer go and ends its calls) and its
// new connections refused until a time.
//
// A closed connection is noticed lazily: each known socket's descriptor is
// checked (fstat, by inode) when a limit is reached, when the list has
// doubled since the last look, and on Sweep() and open().
//
// Thread-safety: thread-safe.
//
//   ConnectionLimiter limiter({.max_connections = 4096});
//   std::string why;
//   if (!limiter.Admit(fd, &why)) refuser.Refuse(fd, why);
//   limiter.Sweep();  // now and then, for open()
#ifndef GEMM_SERVER_EDGE_CONNECTION_LIMITER_H_
#define GEMM_SERVER_EDGE_CONNECTION_LIMITER_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gemm::server {

class ConnectionLimiter {
 public:
  struct Options {
    // Open connections at most, from all clients. Default 0: no cap but the
    // descriptor limit's.
    size_t max_connections = 0;
    // Open connections at most from one address, at accept. Default 0: no
    // cap.
    size_t max_connections_per_client = 0;
    // Open connections at most of one caller identity, at its first call
    // on each (ClaimForIdentity). Default 0: no cap.
    size_t max_connections_per_identity = 0;
    // The flag that sets max_connections_per_client, named in refusals.
    std::string per_client_flag = "--max-client-connections";
    // Descriptors kept free under RLIMIT_NOFILE's soft limit (read when the
    // limiter is made) for everything but connections. Default 0: a quarter
    // of the limit, at most 256.
    size_t reserved_descriptors = 0;
  };

  explicit ConnectionLimiter(const Options& options);

  // Decides on a socket just accepted: true to serve it, false when a limit
  // refuses it, with the reason in `refusal` (when not null). Logs
  // refusals, rate-limited. `answerable` (when not null) says whether the
  // client may be told (ConnectionRefuser): not when it is shut out or the
  // descriptor table is nearly full.
  bool Admit(int fd, std::string* refusal = nullptr,
             bool* answerable = nullptr);
  // The connection a call came on (`peer`, gRPC's name of it) is
  // `identity`'s: OK when it already was, or when the identity holds fewer
  // than max_connections_per_identity connections; RESOURCE_EXHAUSTED
  // naming --max-client-connections otherwise. A peer not among the
  // connections admitted (a Unix socket) is not counted.
  absl::Status ClaimForIdentity(absl::string_view peer,
                                const std::string& identity);
  // Forgets the connections whose sockets have been closed.
  void Sweep();
  // Shuts down every connection `client` holds and refuses its new ones
  // until `until`; returns the connections shut down. Each descriptor is
  // checked to hold the socket admitted (by inode) just before its
  // shutdown(2); gRPC closes the descriptor itself once it sees the end.
  // The lock does not stop gRPC closing a descriptor, nor the process
  // reusing it, between the check and the shutdown: in that window (a few
  // instructions) another connection could be shut down instead, which
  // its client sees as a dropped connection. Accepted, as the lesser cost
  // than holding a duplicate descriptor per connection.
  size_t ShutOut(const std::string& client, absl::Time until);

  // Connections open now (sweeps first).
  size_t open();
  // Connections refused so far.
  uint64_t refused() const;
  // The descriptor number from which connections are refused.
  size_t descriptor_ceiling() const { return descriptor_ceiling_; }

 private:
  struct Connection {
    int fd;
    dev_t device;
    ino_t inode;
    std::string client;
    // Address and port, as ConnectionKey names them.
    std::string key;
  };

  // A client's cap: `configured`, but at most half of what the server can
  // hold (max_connections, and the descriptors under the open-file limit's
  // reserve), so that where descriptors are few one client's flood leaves
  // room for the others.
  size_t ClientCap(size_t configured) const;
  // "FLAG N", and why less applies, for refusals.
  std::string CapText(size_t configured, const std::string& flag) const;
  // Drops the identity claim of the connection `key` and its refusal.
  void ForgetClaimLocked(const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the connections whose descriptors no longer hold their socket.
  void SweepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why `fd` from `client` is refused; empty when it is not.
  std::string RefusalLocked(int fd, const std::string& client)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const size_t reserve_;
  const size_t descriptor_ceiling_;
  mutable absl::Mutex mu_;
  std::vector<Connection> connections_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, size_t> per_client_ ABSL_GUARDED_BY(mu_);
  // Connections claimed by an identity (by key), and each identity's count.
  std::map<std::string, std::string> identity_of_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, size_t> per_identity_ ABSL_GUARDED_BY(mu_);
  // Open connections by key; claims refused lately, and when.
  std::map<std::string, size_t> open_keys_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Time> refused_claims_ ABSL_GUARDED_BY(mu_);
  absl::Time last_sweep_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // A refused claim is weighed again (after a sweep) this long after.
  static constexpr absl::Duration kReclaimAfter = absl::Seconds(1);
  // Clients shut out, and until when.
  std::map<std::string, absl::Time> shut_out_ ABSL_GUARDED_BY(mu_);
  uint64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  size_t next_sweep_at_ ABSL_GUARDED_BY(mu_) = 64;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_EDGE_CONNECTION_LIMITER_H_
