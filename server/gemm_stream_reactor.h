// GemmStreamReactor: one GemmStream call (a gRPC callback-API bidi
// reactor), from its first read to Finish().
//
// It reads job parts (proto/wire_codec.h decodes them from gRPC's slices),
// puts streamed jobs together (JobAssembly), admits and submits complete
// jobs through the JobIntake, and writes results back one message at a
// time (StreamOutbox), keeping one read and at most one write in flight. A
// protocol error fails its job alone with a JobEnd; the call ends with OK
// once the client has half-closed and every job has ended. gRPC operations
// are never started with the reactor's mutex held: their reactions may run
// inline.
//
// Thread-safety: gRPC's reaction threads and the scheduler's workers (job
// completions) call it concurrently; its state is guarded by one mutex. It
// deletes itself in OnDone().
//
//   grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GemmStream(
//       grpc::CallbackServerContext* context) override {
//     return new GemmStreamReactor(&intake_, stream_options_, context); }
#ifndef GEMM_SERVER_GEMM_STREAM_REACTOR_H_
#define GEMM_SERVER_GEMM_STREAM_REACTOR_H_

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "proto/wire_codec.h"
#include "server/gemm_job.h"
#include "server/job_assembly.h"
#include "server/job_intake.h"
#include "server/stream_outbox.h"

namespace gemm::server {

class GemmStreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  struct Options {
    // Size of the result chunks (and the largest inline result). Default
    // 1 MiB, as ServiceLimits::result_chunk_bytes.
    uint64_t result_chunk_bytes = uint64_t{1} << 20;
    // See GemmServer::Options::coalesce_small_writes. Default false.
    bool coalesce_small_writes = false;
  };

  // `intake` must outlive the call. Starts the first read.
  GemmStreamReactor(JobIntake* intake, const Options& options,
                    grpc::CallbackServerContext* context);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  enum class Next { kNone, kWrite, kFinish };

  void OnReadsDone() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleRequest(const wire::DecodedRequest& in)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A job whose params and operands all came in one message (req.job).
  void HandleWholeJob(const wire::DecodedRequest& in)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends job `id` with `status`: drops its partial data and ignores its
  // remaining parts unless `ended` (the failing message ended the job).
  void FailJob(uint64_t id, absl::Status status, bool ended)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Submit(uint64_t id, std::shared_ptr<GemmJob> job,
              uint64_t inline_result_max_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs on a scheduler thread.
  void OnJobDone(uint64_t id, bool inline_result, GemmJob& job,
                 absl::Status status);

  // What to start next: a write, the end of the call, or nothing. Started by
  // Act() after mu_ is released.
  Next DecideLocked(grpc::Status* final_status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Act(Next next, const grpc::Status& final_status);
  // Starts the next write, or finishes the call once nothing is left.
  void Pump();

  static constexpr size_t kMaxDiscarding = 4096;

  JobIntake* const intake_;
  const Options options_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer request_;          // owned by the read in flight
  grpc::ByteBuffer response_;         // owned by the write in flight
  grpc::WriteOptions write_options_;  // of the write in flight

  absl::Mutex mu_;
  wire::DecodedRequest decoded_ ABSL_GUARDED_BY(mu_);  // reused between reads
  std::unordered_map<uint64_t, JobAssembly> receiving_ ABSL_GUARDED_BY(mu_);
  // Failed jobs whose later parts are ignored.
  std::unordered_set<uint64_t> discarding_ ABSL_GUARDED_BY(mu_);
  std::unordered_set<std::shared_ptr<GemmJob>> running_ ABSL_GUARDED_BY(mu_);
  StreamOutbox outbox_ ABSL_GUARDED_BY(mu_);
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_GEMM_STREAM_REACTOR_H_
