// ClientShares: each client's part of what the server holds for it, so that
// one client running at its limit leaves room for the others. A client is
// its address (client_identity.h). Its share counts the bytes of its jobs
// in flight (the in-flight budget's bytes), from the moment a job is
// declared until gRPC has sent its answer (results waiting to be read
// count), and the jobs themselves, from the moment a job is declared until
// its answer is handed to gRPC (results waiting behind others on a stream
// count): a client that makes its next call once answered finds its last
// job gone from its share. Answers handed to gRPC and not yet let go of (a
// unary call's result its client does not read) count apart, up to the job
// limit plus kAnswersLag: a client whose answers wait unread is bounded
// too, while one that calls again as soon as answered never meets it
// (gRPC may hold a delivered answer for a while: two at once were seen).
//
// Thread-safety: thread-safe.
//
//   ClientShares shares({.max_bytes_per_client = 2 << 30});
//   std::shared_ptr<ClientShare> share = shares.ShareOf("10.0.0.7");
//   RETURN_IF_ERROR(share->Take(bytes));  ...  share->Give(bytes);
#ifndef GEMM_SERVER_CORE_CLIENT_SHARES_H_
#define GEMM_SERVER_CORE_CLIENT_SHARES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace gemm::server {

// One client's use. Shared by its calls and its jobs' budget claims.
class ClientShare {
 public:
  // A limit of 0 is no limit.
  ClientShare(std::string client, uint64_t max_bytes, uint64_t max_jobs);

  // Answers not yet let go of that a client may hold beyond its job limit.
  static constexpr uint64_t kAnswersLag = 64;

  // Takes `bytes` and one job; UNAVAILABLE, naming the share, when either
  // would pass its limit, or the answers not yet let go of are at theirs
  // (the client must wait for its own jobs, or read its answers).
  absl::Status Take(uint64_t bytes);
  // Gives back what one Take(`bytes`) took: its bytes, and its job, or its
  // answer once Answered() (`answered` true).
  void Give(uint64_t bytes, bool answered = false);
  // One Take()'s job has been answered: it counts as an answer not yet
  // sent, its bytes still held, until Give(bytes, true).
  void Answered();

  const std::string& client() const { return client_; }
  uint64_t bytes() const;
  uint64_t jobs() const;
  // Answered jobs whose answers gRPC has not yet let go of.
  uint64_t answers() const;

 private:
  const std::string client_;
  const uint64_t max_bytes_;
  const uint64_t max_jobs_;
  mutable absl::Mutex mu_;
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t jobs_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t answers_ ABSL_GUARDED_BY(mu_) = 0;
};

class ClientShares {
 public:
  struct Options {
    // Bytes of jobs in flight one client may hold. Default 0: no limit but
    // the whole budget.
    uint64_t max_bytes_per_client = 0;
    // Jobs one client may hold (declared and not yet answered). Default 0:
    // no limit.
    uint64_t max_jobs_per_client = 0;
  };

  explicit ClientShares(const Options& options) : options_(options) {}

  // The share of `client`, one object as long as any call or job holds it.
  std::shared_ptr<ClientShare> ShareOf(const std::string& client);
  // Clients with a share alive.
  size_t clients();

  const Options& options() const { return options_; }

 private:
  const Options options_;
  absl::Mutex mu_;
  std::map<std::string, std::weak_ptr<ClientShare>> shares_
      ABSL_GUARDED_BY(mu_);
  size_t next_sweep_at_ ABSL_GUARDED_BY(mu_) = 64;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CORE_CLIENT_SHARES_H_
