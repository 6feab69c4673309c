#include "client/lib/call_tracker.h"

namespace gemm::client {

CallTracker::Token::Token(std::shared_ptr<CallTracker> tracker)
    : tracker_(std::move(tracker)) {
  absl::MutexLock lock(&tracker_->mu_);
  ++tracker_->calls_;
}

CallTracker::Token::~Token() {
  absl::MutexLock lock(&tracker_->mu_);
  --tracker_->calls_;
}

void CallTracker::WaitForIdle() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* calls) { return *calls == 0; }, &calls_));
}

}  // namespace gemm::client
