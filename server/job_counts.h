// JobCounts: Info's job counters (ServerStats), kept by what each caller
// was sent.
//
// A job counts once. Turned away before it was accepted (invalid, over a
// limit, queue or budget full, shutting down): rejected, as its error is
// decided. Accepted: ok when its result leaves for the caller; failed when
// its error does, or when the call ended first (cancelled, deadline passed,
// stream broken), so that a result nobody received is not counted as
// delivered. Each count is made before the answer is handed to gRPC, so a
// caller that has its answer finds it counted.
//
// Thread-safety: thread-safe.
//
//   counts.CountAnswered(status.ok() && !context->IsCancelled());
//   reactor->Finish(ToGrpcStatus(status));
#ifndef GEMM_SERVER_JOB_COUNTS_H_
#define GEMM_SERVER_JOB_COUNTS_H_

#include <atomic>
#include <cstdint>

namespace gemm::server {

class JobCounts {
 public:
  void CountRejected() { rejected_.fetch_add(1); }
  // An accepted job's answer: its result (`ok`) or an error.
  void CountAnswered(bool ok) { (ok ? ok_ : failed_).fetch_add(1); }

  uint64_t ok() const { return ok_.load(); }
  uint64_t failed() const { return failed_.load(); }
  uint64_t rejected() const { return rejected_.load(); }

 private:
  std::atomic<uint64_t> ok_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> rejected_{0};
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_JOB_COUNTS_H_
