// StreamSession: the GemmStream protocol of one call, apart from gRPC.
//
// It takes the call's messages one at a time, in order, and decides what
// each does: starts a job (validated and admitted through the JobIntake),
// adds a chunk to one (JobAssembly), ends one (queued on the scheduler), or
// breaks the stream. What goes back to the client waits in its outbox. The
// contract it keeps is the one proto/gemm.proto states for GemmStream:
//   - Every job the server reads the start of gets exactly one JobEnd.
//   - An error in one job's params or data ends that job alone, with its
//     error in the JobEnd; the stream goes on. Parts of that job that still
//     arrive are ignored, up to its end_of_job.
//   - A message that cannot belong to a job (malformed; a part of a job that
//     is not open; a job started again while open) breaks the stream: no
//     more messages are read, jobs still being received end with ABORTED,
//     accepted jobs run and send their results, and then the call ends with
//     INVALID_ARGUMENT naming the message.
//   - A job started while max_open_jobs are being received fails with
//     RESOURCE_EXHAUSTED; max_open_jobs such failures in a row break the
//     stream the same way, the call and its jobs still being received
//     ending with RESOURCE_EXHAUSTED: a client that opens jobs and never
//     finishes them costs the server one JobEnd a job otherwise.
//   - Flow control: when the in-flight budget or the job queue is full, the
//     message that needs room waits (Next::kWaitForCapacity) instead of
//     failing, and the caller reads nothing more until RetryWaiting() gets
//     through; HTTP/2 flow control then holds the client back. A stream
//     that still has jobs half received fails the new job with UNAVAILABLE
//     instead, since those jobs need its later messages to finish: waiting
//     could wait on itself.
//   - Drain() (server shutdown): jobs not yet accepted end with UNAVAILABLE,
//     accepted ones finish, and no more messages are read.
//
// Thread-safety: not thread-safe; its stream reactor guards it. Job
// completions reach it through the reactor, which calls OnJobDone() under
// the same lock.
//
//   StreamSession session(&intake, options, call, on_job_done);
//   if (session.OnMessage(buffer) == StreamSession::Next::kRead) StartRead();
//   while (!session.outbox().empty()) StartWrite(session.outbox().Next());
#ifndef GEMM_SERVER_RPC_STREAM_SESSION_H_
#define GEMM_SERVER_RPC_STREAM_SESSION_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/wire_codec.h"
#include "server/admission/job_assembly.h"
#include "server/core/gemm_job.h"
#include "server/rpc/job_intake.h"
#include "server/rpc/stream_outbox.h"

namespace gemm::server {

class StreamSession {
 public:
  struct Options {
    // Size of the result chunks (and the largest inline result). Default
    // 1 MiB, as ServiceLimits::result_chunk_bytes.
    uint64_t result_chunk_bytes = uint64_t{1} << 20;
    // Failed jobs whose later parts are ignored until their end_of_job; the
    // oldest are forgotten beyond this many (a part of a forgotten job then
    // breaks the stream). Default 4096.
    size_t max_ignored_jobs = 4096;
    // A job being received that gets no data for this long fails with
    // DEADLINE_EXCEEDED (ExpireStalled()). Default 30 s; zero: never.
    absl::Duration stall_timeout = absl::Seconds(30);
    // Jobs being received at once; a job declared past it fails with
    // RESOURCE_EXHAUSTED, and as many such failures in a row (no job
    // started between them) break the stream with RESOURCE_EXHAUSTED: its
    // client opens jobs and does not finish them. Default 0: no limit.
    uint64_t max_open_jobs = 0;
  };

  // What the caller does after a message.
  enum class Next {
    kRead,             // read the next message
    kWaitForCapacity,  // read nothing until RetryWaiting() says kRead
    kStopReading,      // the stream is broken or draining: read no more
  };

  // Runs on a scheduler thread when a queued job has finished; the caller
  // takes its lock and calls OnJobDone().
  using JobDone = std::function<void(uint64_t id, bool inline_result,
                                     GemmJob& job, absl::Status status)>;

  // `intake` must outlive the session; `call` is attached to its jobs.
  StreamSession(JobIntake* intake, const Options& options, JobIntake::Call call,
                JobDone job_done);

  // Handles the next message of the call.
  Next OnMessage(const grpc::ByteBuffer& buffer);
  // After kWaitForCapacity, when room may have freed up: tries again.
  Next RetryWaiting();
  // The client half-closed: jobs it started but never ended fail.
  void OnReadsDone();
  // The call is gone: drops jobs being received and cancels queued ones.
  void OnCancel();
  // Server shutdown: ends every job not yet accepted with UNAVAILABLE and
  // stops reading; accepted jobs finish.
  void Drain();
  // Fails the jobs being received that got no data since `now` less the
  // stall timeout; their later parts are ignored. Returns how many. Time
  // the session spends waiting for room (not reading) does not count.
  int ExpireStalled(absl::Time now);
  // A queued job finished (see JobDone).
  void OnJobDone(uint64_t id, bool inline_result, GemmJob& job,
                 absl::Status status);

  StreamOutbox& outbox() { return outbox_; }
  // Nothing more will happen but sending the outbox: reading is over and
  // no job is queued or running. Then the call ends with final_status().
  bool Settled() const;
  // OK, INVALID_ARGUMENT when a message broke the stream, UNAVAILABLE when
  // the server drained it before the client half-closed.
  absl::Status final_status() const { return final_status_; }
  // Jobs queued or running.
  size_t jobs_running() const { return running_.size(); }
  // A message or a complete job waits for room (Next::kWaitForCapacity).
  bool waiting() const { return waiting_; }

 private:
  // Handles message_; sets waiting_ when it needs room.
  void Handle();
  void HandleWholeJob();
  // Breaks the stream: `field` (params or job) started job `id` again while
  // it is open.
  void BreakOnReopen(uint64_t id, const char* field);
  // Starts job `id` from its params; false when it must wait for room.
  bool StartJob(uint64_t id, bool ended);
  // Ends job `id` with `status`: drops its partial data and ignores its
  // remaining parts unless `ended` (the failing message ended the job).
  void FailJob(uint64_t id, absl::Status status, bool ended);
  // Queues a complete job; false when it must wait for room in the queue.
  bool Submit(uint64_t id, std::shared_ptr<GemmJob> job,
              uint64_t inline_result_max_bytes);
  // Whether a job turned away with `status` may wait for room instead;
  // `needs_budget`: it waits for in-flight budget (else for the queue).
  bool MayWait(const absl::Status& status, bool needs_budget) const;
  // Stops reading for good: `why` is the call's status; jobs still being
  // received end with `job_code` (ABORTED, UNAVAILABLE or
  // RESOURCE_EXHAUSTED).
  void StopReading(absl::Status why, absl::StatusCode job_code);
  void Ignore(uint64_t id);
  void Unignore(uint64_t id);
  bool IsOpen(uint64_t id) const;
  // Lets go of the last message's bytes.
  void ReleaseMessage();

  JobIntake* const intake_;
  const Options options_;
  const JobIntake::Call call_;
  const JobDone job_done_;

  uint64_t messages_ = 0;         // read so far, for error messages
  wire::DecodedRequest message_;  // the last one read (or waiting)
  // A complete job waiting for room in the queue.
  struct WaitingSubmit {
    uint64_t id = 0;
    std::shared_ptr<GemmJob> job;
    uint64_t inline_result_max_bytes = 0;
  };
  bool waiting_ = false;  // message_ or waiting_submit_ waits for room
  WaitingSubmit waiting_submit_;

  std::unordered_map<uint64_t, JobAssembly> receiving_;
  // Failed jobs the client has not ended yet, oldest first.
  std::unordered_set<uint64_t> ignored_;
  std::deque<uint64_t> ignored_order_;
  std::unordered_map<uint64_t, std::shared_ptr<GemmJob>> running_;
  StreamOutbox outbox_;
  // Jobs failed in a row for max_open_jobs, none started since.
  uint64_t open_refusals_in_a_row_ = 0;
  bool reads_done_ = false;
  bool stopped_ = false;  // broken, drained or cancelled: reads no more
  bool cancelled_ = false;
  absl::Status final_status_;
  // How jobs not complete when reading stopped end.
  absl::StatusCode stop_job_code_ = absl::StatusCode::kAborted;
  std::string stop_job_reason_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_RPC_STREAM_SESSION_H_
