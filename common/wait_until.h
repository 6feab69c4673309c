// WaitUntil: lets a test wait for state it can observe (a counter, a metric,
// a status, a file) instead of sleeping for a guessed time. It polls
// `condition` until it holds or `timeout` passes; the poll interval is not a
// guess about timing, only how often to look.
//
// Thread-safety: a stateless function; `condition` must be safe to call from
// the waiting thread.
//
//   ASSERT_TRUE(WaitUntil([&] { return executor.batches() >= 1; },
//                         absl::Seconds(10)));
#ifndef GEMM_COMMON_WAIT_UNTIL_H_
#define GEMM_COMMON_WAIT_UNTIL_H_

#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace gemm::testing {

// True as soon as `condition()` is true; false when it still is not after
// `timeout` (it is checked once more at the deadline).
template <typename Condition>
bool WaitUntil(Condition&& condition, absl::Duration timeout,
               absl::Duration poll = absl::Milliseconds(5)) {
  const absl::Time give_up = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() >= give_up) return condition();
    absl::SleepFor(poll);
  }
  return true;
}

}  // namespace gemm::testing

#endif  // GEMM_COMMON_WAIT_UNTIL_H_
