// TurnQueue: turns at one resource, taken in the order they are asked for
// (a ticket lock). The CPU backend's GEMMs take turns at OpenBLAS this way:
// a heavy job asks again for each step, so light jobs that arrive during a
// step go before the next one, and no stream of light jobs can hold a step
// back for longer than the jobs that asked before it.
//
// Thread-safety: thread-safe.
//
//   TurnQueue turns;
//   {
//     TurnQueue::Turn turn(&turns);  // waits for the turns asked before it
//     ...                            // the resource is this thread's
//   }                                // the next turn begins
#ifndef GEMM_SERVER_CPU_TURN_QUEUE_H_
#define GEMM_SERVER_CPU_TURN_QUEUE_H_

#include <cstdint>

#include "absl/synchronization/mutex.h"

namespace gemm::server {

class TurnQueue {
 public:
  // One turn, from the moment it comes until destroyed.
  class Turn {
   public:
    explicit Turn(TurnQueue* queue) : queue_(queue) {
      absl::MutexLock lock(&queue_->mu_);
      const Ticket ticket{queue_, queue_->next_++};
      queue_->mu_.Await(absl::Condition(&ticket, &Ticket::Due));
    }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    ~Turn() {
      absl::MutexLock lock(&queue_->mu_);
      ++queue_->serving_;
    }

   private:
    TurnQueue* const queue_;
  };

  // Turns asked for and not yet ended (the one running among them).
  uint64_t asked() const {
    absl::MutexLock lock(&mu_);
    return next_ - serving_;
  }

 private:
  struct Ticket {
    const TurnQueue* queue;
    uint64_t number;
    // Evaluated by Await, with mu_ held.
    bool Due() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return queue->serving_ == number;
    }
  };

  mutable absl::Mutex mu_;
  // The next ticket to hand out, and the one whose turn it is.
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t serving_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CPU_TURN_QUEUE_H_
