// CallTracker counts a client's calls that are still running, so that
// ~GemmClient can wait for the last one: a channel (and gRPC itself) must
// never be released from one of gRPC's own threads.
//
// Thread-safety: thread-safe; a Token may be made and dropped on any thread.
//
//   auto tracker = std::make_shared<CallTracker>();
//   auto token = std::make_shared<CallTracker::Token>(tracker);  // per call
//   tracker->WaitForIdle();  // returns once every token is gone
#ifndef GEMM_CLIENT_LIB_CALL_TRACKER_H_
#define GEMM_CLIENT_LIB_CALL_TRACKER_H_

#include <memory>

#include "absl/synchronization/mutex.h"

namespace gemm::client {

class CallTracker {
 public:
  // Held by each call from its start to its very last step.
  class Token {
   public:
    explicit Token(std::shared_ptr<CallTracker> tracker);
    ~Token();
    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;

   private:
    std::shared_ptr<CallTracker> tracker_;
  };

  // Blocks until no Token of this tracker is left.
  void WaitForIdle();

 private:
  absl::Mutex mu_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gemm::client

#endif  // GEMM_CLIENT_LIB_CALL_TRACKER_H_
