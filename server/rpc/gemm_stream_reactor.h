// GemmStreamReactor: one GemmStream call (a gRPC callback-API bidi
// reactor), from its first read to Finish().
//
// The protocol itself (what each message does, which job gets which
// answer, when to stop reading) is the StreamSession's; the reactor moves
// bytes between it and gRPC. It keeps at most one read and one write in
// flight, reads the next message only when the session says so (while the
// in-flight budget or the queue is full it reads nothing, and waits for
// the JobIntake's wake), writes the session's outbox one message at a time,
// and finishes the call once the session has settled and the outbox is
// empty. gRPC operations are never started with the reactor's mutex held:
// their reactions may run inline.
//
// Lifetime: it deletes itself in OnDone(). Threads other than gRPC's
// reactions (scheduler workers finishing jobs, the intake's wake thread,
// shutdown's Drain) reach it only while it cannot finish: a running job, a
// pending wake or a hold (holds_) keeps Finish() back until they are done.
//
// Thread-safety: thread-safe; its state is guarded by one mutex.
//
//   grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GemmStream(
//       grpc::CallbackServerContext* context) override {
//     return new GemmStreamReactor(&intake_, &streams_, options_, context,
//                                  client); }
#ifndef GEMM_SERVER_RPC_GEMM_STREAM_REACTOR_H_
#define GEMM_SERVER_RPC_GEMM_STREAM_REACTOR_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "server/core/gemm_job.h"
#include "server/rpc/job_intake.h"
#include "server/rpc/stream_session.h"

namespace gemm::server {

class GemmStreamReactor;

// The open GemmStream calls of a service, so that shutdown can drain them.
//
// Thread-safety: thread-safe.
class StreamRegistry {
 public:
  // Streams opened after DrainAll() are drained as they start.
  void DrainAll();
  // StreamSession::ExpireStalled(now) on every open stream.
  void ExpireStalled(absl::Time now);
  size_t open_streams() const;

 private:
  friend class GemmStreamReactor;
  // False once DrainAll() has run: the stream drains at once.
  bool Add(GemmStreamReactor* stream);
  void Remove(GemmStreamReactor* stream);

  // Runs `fn` on every open stream's session under its lock, then lets each
  // stream start what is due (writes, the end of the call).
  void ForEach(absl::FunctionRef<void(StreamSession&)> fn);

  mutable absl::Mutex mu_;
  std::unordered_set<GemmStreamReactor*> streams_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

class GemmStreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  struct Options {
    // Size of the result chunks (and the largest inline result). Default
    // 1 MiB, as ServiceLimits::result_chunk_bytes.
    uint64_t result_chunk_bytes = uint64_t{1} << 20;
    // See GemmServer::Options::coalesce_small_writes. Default false.
    bool coalesce_small_writes = false;
    // See ServiceLimits::job_stall_timeout. Default 30 s.
    absl::Duration job_stall_timeout = absl::Seconds(30);
    // See ServiceLimits::max_open_jobs_per_stream. Default 0: no limit.
    uint64_t max_open_jobs = 0;
    // Called in OnDone, with the caller's peer (grpc::ServerContext::peer()
    // as the call began), when the call began and its deadline, when the
    // caller cancelled the stream before it sent a message
    // (cancel_flood_guard.h). Default: nothing.
    std::function<void(const std::string& peer,
                       std::chrono::system_clock::time_point began,
                       std::chrono::system_clock::time_point deadline)>
        on_early_cancel;
  };

  // `intake` and `registry` must outlive the call. Starts the first read.
  // `client` is the caller's identity (call_auth.h).
  GemmStreamReactor(JobIntake* intake, StreamRegistry* registry,
                    const Options& options,
                    grpc::CallbackServerContext* context,
                    const std::string& client);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  friend class StreamRegistry;
  enum class Next { kNone, kWrite, kFinish };

  // The registry's work on the session (drain, expiry), in two steps around
  // the registry's lock: apply `fn` and take a hold that keeps the reactor
  // alive; then ReleaseHold() starts what is due.
  void HoldAndApply(absl::FunctionRef<void(StreamSession&)> fn);

  // Acts on what the session said after a message: read on, or wait for
  // room. Returns whether a read is to be started (a hold is then taken).
  bool AfterMessageLocked(StreamSession::Next next, uint64_t epoch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs on the intake's wake thread.
  void OnCapacity();
  // Runs on a scheduler thread.
  void OnJobDone(uint64_t id, bool inline_result, GemmJob& job,
                 absl::Status status);
  bool NoHolds() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return holds_ == 0;
  }
  // Starts the read decided under the lock, then lets go of its hold.
  void StartReadAndRelease();
  // Lets go of a hold and starts what is due (a write, or Finish()).
  void ReleaseHold();

  // What to start next: a write, the end of the call, or nothing. Started by
  // Act() after mu_ is released.
  Next DecideLocked(grpc::Status* final_status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Act(Next next, const grpc::Status& final_status);
  // Starts the next write, or finishes the call once nothing is left.
  void Pump();

  JobIntake* const intake_;
  StreamRegistry* const registry_;
  const Options options_;
  grpc::CallbackServerContext* const context_;
  // The peer as the call began (gRPC forgets it once the call is over),
  // and when.
  const std::string peer_;
  const std::chrono::system_clock::time_point began_ =
      std::chrono::system_clock::now();
  // A message was read (the stream was more than opened and reset).
  bool read_any_ = false;
  grpc::ByteBuffer request_;          // owned by the read in flight
  grpc::ByteBuffer response_;         // owned by the write in flight
  grpc::WriteOptions write_options_;  // of the write in flight

  absl::Mutex mu_;
  StreamSession session_ ABSL_GUARDED_BY(mu_);
  // Threads that will touch the reactor after letting go of mu_ (a read
  // about to start, a drain); Finish() waits for 0.
  int holds_ ABSL_GUARDED_BY(mu_) = 0;
  // The intake's ticket while a wake is pending; 0 when none.
  uint64_t wait_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_RPC_GEMM_STREAM_REACTOR_H_
