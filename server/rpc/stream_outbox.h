// StreamOutbox: the messages a GemmStream call still has to send, in order.
//
// A finished job's result leaves as ResultChunks of result_chunk_bytes
// framed around the job's own C (no copy; the message holds the job until
// gRPC has sent it) and a closing JobEnd with the timing, or, when C is
// small enough and the client asked for it, inside the JobEnd itself. A
// failed job leaves as one JobEnd with its status. It counts every job it
// ends in Info's JobCounts: a rejected one when it is queued, an accepted
// one by what leaves, its result or its error; an accepted job whose end
// is dropped unsent (Clear) counts as failed (CANCELLED).
//
// Thread-safety: not thread-safe; its stream reactor guards it.
//
//   StreamOutbox outbox(limits.result_chunk_bytes, &intake.counts());
//   outbox.PushResult(job_id, job, outbox.FitsInline(job->problem(), max));
//   while (!outbox.empty()) StartWrite(outbox.Next());
#ifndef GEMM_SERVER_RPC_STREAM_OUTBOX_H_
#define GEMM_SERVER_RPC_STREAM_OUTBOX_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "server/core/gemm_job.h"
#include "server/observability/job_counts.h"
#include "server/observability/job_event_log.h"

namespace gemm::server {

class StreamOutbox {
 public:
  // `result_chunk_bytes`: the largest ResultChunk, and the largest inline
  // result. `counts` (and `events`, which may be null) must outlive the
  // outbox; refused and failed jobs are logged to `events` as `client`'s.
  StreamOutbox(uint64_t result_chunk_bytes, JobCounts* counts,
               JobEventLog* events = nullptr, std::string client = "")
      : result_chunk_bytes_(result_chunk_bytes),
        counts_(counts),
        events_(events),
        client_(std::move(client)) {}

  // Whether a result of `problem` goes inside its JobEnd, given the job's
  // params.inline_result_max_bytes. Never beyond one result chunk, so an
  // inline result always fits the server's largest message (GemmServer
  // leaves wire::kResultMessageOverheadBytes beside a chunk).
  bool FitsInline(const GemmProblem& problem,
                  uint64_t inline_result_max_bytes) const;

  // Queues the end record of a job turned away before it was accepted (or
  // of a message that named no job).
  void PushRejected(uint64_t job_id, absl::Status status,
                    const GemmProblem* problem = nullptr);
  // Queues the end record of an accepted job that failed.
  void PushFailed(uint64_t job_id, absl::Status status, const GemmJob& job);
  // Queues a finished job's result.
  void PushResult(uint64_t job_id, std::shared_ptr<GemmJob> job,
                  bool inline_result);

  bool empty() const { return queue_.empty(); }
  // Drops everything not yet sent (the call is cancelled or broken).
  void Clear();
  // The next message to send; call only when !empty().
  grpc::ByteBuffer Next();

 private:
  // A job's result (chunks, then its end record) or a failed job's end
  // record.
  struct Outgoing {
    uint64_t job_id = 0;
    absl::Status status;
    std::shared_ptr<GemmJob> job;  // set for a successful result
    uint64_t offset = 0;           // next byte of C to send
    // C goes inside the JobEnd (JobEnd.c) rather than in chunks.
    bool inline_result = false;
    // Counted when its end leaves or is dropped (rejections are counted
    // when queued).
    bool accepted = false;
    // A failed job's labels in the metrics (not the job itself, whose
    // memory goes at once).
    JobLabels labels;
  };

  const uint64_t result_chunk_bytes_;
  JobCounts* const counts_;
  JobEventLog* const events_;
  const std::string client_;
  std::deque<Outgoing> queue_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_RPC_STREAM_OUTBOX_H_
