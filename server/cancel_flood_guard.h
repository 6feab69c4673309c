// CancelFloodGuard: notices a client that cancels calls before the server
// has read their requests, faster than any client that means to have them
// served would: the HTTP/2 "rapid reset" flood (CVE-2023-44487), which
// costs the attacker two frames a call and the server a call's setup and
// teardown in gRPC, and which gRPC 1.51 does not bound. Under it the
// server's gRPC threads fall behind and every client's calls wait in line
// (docs/load-testing.md, "Under attack").
//
// Each client (its address) has a bucket of `max_early_cancels` that
// refills at a tenth of it per second. An early cancel takes one; the one
// that finds the bucket empty trips the guard, and the service shuts the
// client out (ConnectionLimiter::ShutOut): its connections are closed and
// new ones refused for a while. A call that ran past its own deadline is
// not the client's doing and is not counted.
//
// Thread-safety: thread-safe.
//
//   CancelFloodGuard guard({.max_early_cancels = 1000});
//   if (guard.OnEarlyCancel(client, absl::Now())) ShutOut(client);
#ifndef GEMM_SERVER_CANCEL_FLOOD_GUARD_H_
#define GEMM_SERVER_CANCEL_FLOOD_GUARD_H_

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
  };

  explicit CancelFloodGuard(const Options& options) : options_(options) {}

  // Counts one early cancel of `client`; true when it finds the client's
  // allowance spent (the bucket starts over full).
  bool OnEarlyCancel(const std::string& client, absl::Time now);

  // Times the guard has tripped.
  uint64_t trips() const;

 private:
  struct Bucket {
    double tokens;
    absl::Time updated;
  };

  const Options options_;
  mutable absl::Mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  uint64_t trips_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CANCEL_FLOOD_GUARD_H_
