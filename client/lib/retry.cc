#include "client/lib/retry.h"

#include <algorithm>
#include <cmath>

namespace gemm::client {

absl::Status ValidateRetryPolicy(const RetryPolicy& retry) {
  if (retry.max_attempts < 1 || retry.initial_backoff < absl::ZeroDuration() ||
      retry.max_backoff < retry.initial_backoff ||
      retry.backoff_multiplier < 1.0 || retry.jitter < 0 || retry.jitter > 1) {
    return absl::InvalidArgumentError(
        "retry: need max_attempts >= 1, 0 <= initial_backoff <= max_backoff, "
        "backoff_multiplier >= 1 and jitter in [0, 1]");
  }
  return absl::OkStatus();
}

absl::Duration BackoffBeforeRetry(const RetryPolicy& policy, int attempt) {
  const double scale =
      std::pow(std::max(policy.backoff_multiplier, 1.0), attempt - 1);
  return std::min(policy.initial_backoff * scale, policy.max_backoff);
}

RetryScheduler::RetryScheduler(RetryPolicy policy, uint64_t seed)
    : policy_(policy), random_(seed), thread_([this] { Loop(); }) {}

RetryScheduler::~RetryScheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

absl::Duration RetryScheduler::DrawBackoff(int attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  return DrawBackoffLocked(attempt);
}

absl::Duration RetryScheduler::DrawBackoffLocked(int attempt) {
  std::uniform_real_distribution<double> factor(1.0 - policy_.jitter,
                                                1.0 + policy_.jitter);
  return BackoffBeforeRetry(policy_, attempt) * std::max(0.0, factor(random_));
}

void RetryScheduler::AfterBackoff(int attempt, std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Duration wait = DrawBackoffLocked(attempt);
  tasks_.emplace(Clock::now() + absl::ToChronoNanoseconds(wait),
                 std::move(task));
  wake_.notify_one();
}

void RetryScheduler::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (tasks_.empty()) {
      // Tasks hold their calls' tokens, so none is left at shutdown.
      if (stopping_) return;
      wake_.wait(lock);
      continue;
    }
    auto first = tasks_.begin();
    if (first->first > Clock::now()) {
      wake_.wait_until(lock, first->first);
      continue;
    }
    std::function<void()> task = std::move(first->second);
    tasks_.erase(first);
    lock.unlock();
    task();
    task = nullptr;
    lock.lock();
  }
}

}  // namespace gemm::client
