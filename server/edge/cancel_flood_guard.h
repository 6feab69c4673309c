// CancelFloodGuard: notices a client that cancels calls before the server
// has read their requests, faster than any client that means to have them
// served would: the HTTP/2 "rapid reset" flood (CVE-2023-44487), which
// costs the attacker two frames a call and the server a call's setup and
// teardown in gRPC, and which gRPC 1.51 does not bound. Under it the
// server's gRPC threads fall behind and every client's calls wait in line
// (docs/how-to/load-testing.md, "Under attack").
//
// Each client (its address) has a bucket of `max_early_cancels` that
// refills at a tenth of it per second. An early cancel takes one; the one
// that finds the bucket empty trips the guard, and the service shuts the
// client out (ConnectionLimiter::ShutOut) for `shut_out_for`, during which
// the client's cancels are not counted (shutting its connections cancels
// its open calls). What counts as an early cancel is the caller's to say
// (GemmServiceImpl::NoteEarlyCancel leaves out calls cancelled near their
// deadline).
//
// Every method's calls are seen: Gemm's and GemmStream's by their
// reactors, the others' by an interceptor (early_cancel_interceptor.h).
// The unary methods, the health check's included, are served through
// gRPC's generic API, since gRPC drops a registered unary method's call
// that is reset before its request arrives without the service seeing it.
//
// Thread-safety: thread-safe.
//
//   CancelFloodGuard guard({.max_early_cancels = 1000});
//   if (guard.OnEarlyCancel(client, absl::Now())) ShutOut(client);
#ifndef GEMM_SERVER_EDGE_CANCEL_FLOOD_GUARD_H_
#define GEMM_SERVER_EDGE_CANCEL_FLOOD_GUARD_H_

#include <cstdint>
#include <string>
#include <unordered_map>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gemm::server {

class CancelFloodGuard {
 public:
  struct Options {
    // Calls a client may cancel before their requests are read, at once;
    // the allowance refills at a tenth of it per second. Default 1000 (100
    // a second sustained); 0: no limit.
    uint64_t max_early_cancels = 1000;
    // How long a client that tripped the guard stays shut out; its cancels
    // meanwhile are not counted. Default 10 s.
    absl::Duration shut_out_for = absl::Seconds(10);
  };

  explicit CancelFloodGuard(const Options& options) : options_(options) {}

  // Counts one early cancel of `client`; true when it finds the client's
  // allowance spent: the client is to be shut out until `now` +
  // shut_out_for, and its bucket starts over full then.
  bool OnEarlyCancel(const std::string& client, absl::Time now);

  // Times a client was shut out.
  uint64_t trips() const;

 private:
  struct Bucket {
    double tokens;
    absl::Time updated;
    absl::Time shut_out_until = absl::InfinitePast();
  };

  // Drops buckets that are full and not shut out (the same as none).
  void PruneLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  // Pruned when the map reaches this size (doubling, so that pruning stays
  // a constant cost per cancel however many clients there are).
  size_t prune_at_ ABSL_GUARDED_BY(mu_) = 4096;
  uint64_t trips_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_EDGE_CANCEL_FLOOD_GUARD_H_
