// Retries of jobs the server turned away with UNAVAILABLE: the policy (how
// often, how long to wait), the exponential backoff it implies, and the
// RetryScheduler that runs a retry once its jittered wait is over, on a
// thread of its own rather than on one of gRPC's.
//
// Thread-safety: RetryPolicy is a plain value; RetryScheduler is
// thread-safe, and its destructor runs every task still waiting (tasks hold
// their calls' tokens, so none is left when a GemmClient goes).
//
//   RetryScheduler retries({.max_attempts = 4});
//   // attempt 1 failed with UNAVAILABLE:
//   retries.AfterBackoff(/*attempt=*/1, [=] { StartAttempt(2); });
#ifndef GEMM_CLIENT_LIB_RETRY_H_
#define GEMM_CLIENT_LIB_RETRY_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace gemm::client {

// When and how often a job that failed with UNAVAILABLE is sent again.
struct RetryPolicy {
  // Attempts in all, the first one included; 1 (the default) disables
  // retries.
  int max_attempts = 1;
  // Wait before the second attempt. Default 50 ms.
  absl::Duration initial_backoff = absl::Milliseconds(50);
  // Longest wait between attempts. Default 2 s.
  absl::Duration max_backoff = absl::Seconds(2);
  // Growth of the wait from one attempt to the next. Default 2.
  double backoff_multiplier = 2.0;
  // Each wait is scaled by a uniform factor in [1 - jitter, 1 + jitter], so
  // that clients turned away together do not come back together.
  // Default 0.2.
  double jitter = 0.2;
};

// INVALID_ARGUMENT unless max_attempts >= 1, 0 <= initial_backoff <=
// max_backoff, backoff_multiplier >= 1 and jitter is in [0, 1].
absl::Status ValidateRetryPolicy(const RetryPolicy& policy);

// The wait before attempt `attempt` + 1 (attempt counts from 1), without
// jitter.
absl::Duration BackoffBeforeRetry(const RetryPolicy& policy, int attempt);

// Runs tasks after a jittered backoff, in the order their waits end.
class RetryScheduler {
 public:
  explicit RetryScheduler(RetryPolicy policy,
                          uint64_t seed = std::random_device{}());
  ~RetryScheduler();  // runs the tasks still waiting, then stops
  RetryScheduler(const RetryScheduler&) = delete;
  RetryScheduler& operator=(const RetryScheduler&) = delete;

  // The jittered wait after attempt `attempt`: BackoffBeforeRetry scaled by
  // a factor drawn from [1 - jitter, 1 + jitter].
  absl::Duration DrawBackoff(int attempt);

  // Runs `task` once DrawBackoff(attempt) has passed.
  void AfterBackoff(int attempt, std::function<void()> task);

 private:
  using Clock = std::chrono::steady_clock;

  absl::Duration DrawBackoffLocked(int attempt);
  void Loop();

  const RetryPolicy policy_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::multimap<Clock::time_point, std::function<void()>> tasks_;
  std::mt19937_64 random_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace gemm::client

#endif  // GEMM_CLIENT_LIB_RETRY_H_
