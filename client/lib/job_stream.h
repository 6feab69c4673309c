// JobStream: many jobs pipelined on one GemmStream call, on one channel.
// Jobs are sent in the order submitted (each as one message, or as params
// and operand chunks: StreamJob), their results come back in any order and
// land in the callers' buffers, and each job's callback runs exactly once:
// with the server's timing, the job's own error, or the stream's error when
// the call ends first. A job the server turns away with UNAVAILABLE is sent
// again on the same stream after a backoff (Options.max_attempts).
//
// GemmClient::OpenStream() is the usual way to get one; Open() takes the
// narrow set of things a stream needs from a client.
//
// Thread-safety: thread-safe. Callbacks run on gRPC's threads (or the retry
// scheduler's). The caller's buffers must stay valid until the job's
// callback has run. Never destroy a JobStream from one of its callbacks.
//
//   std::unique_ptr<JobStream> stream = client->OpenStream();
//   stream->Submit(args, c.data(), [](absl::StatusOr<v1::Timing> t) { ... });
//   absl::Status status = stream->Finish();  // after every callback has run
#ifndef GEMM_CLIENT_LIB_JOB_STREAM_H_
#define GEMM_CLIENT_LIB_JOB_STREAM_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/lib/call_tracker.h"
#include "client/lib/gemm_args.h"
#include "client/lib/retry.h"
#include "client/lib/stream_job.h"
#include "grpcpp/generic/generic_stub.h"

namespace gemm::client {

class JobStream {
 public:
  struct Options {
    // How jobs are cut into messages, and the inline result size asked for.
    StreamMessageLimits limits;
    // Lets gRPC hold a small message back while more are queued behind it
    // (a buffer hint). Default false.
    bool coalesce_small_writes = false;
    // Deadline of the whole call; zero (the default) means none.
    absl::Duration timeout = absl::ZeroDuration();
    // Attempts per job, the first included, when a RetryScheduler is given.
    // Default 1.
    int max_attempts = 1;
  };

  // Starts a GemmStream call on `stub`. The call holds a token of `tracker`
  // until it has ended; `stub` and `retries` (null: no retries) must
  // outlive it, e.g. until tracker->WaitForIdle() returns.
  static std::unique_ptr<JobStream> Open(grpc::GenericStub* stub,
                                         std::string target,
                                         const Options& options,
                                         std::shared_ptr<CallTracker> tracker,
                                         RetryScheduler* retries);

  // Runs one job on a call of its own, which ends with the job; no
  // retries. The same lifetime rules as Open().
  static void RunOne(grpc::GenericStub* stub, const Options& options,
                     std::shared_ptr<CallTracker> tracker, const GemmArgs& args,
                     float* c_out, GemmCallback done);

  ~JobStream();  // Finish()es.
  JobStream(const JobStream&) = delete;
  JobStream& operator=(const JobStream&) = delete;

  // The server address this stream talks to.
  const std::string& target() const { return target_; }

  // True once the call has ended (after Finish(), or because the stream
  // broke); Submit() then fails every job at once.
  bool done() const;

  // Queues a job; `done` runs once C is in c_out (m*n floats) or the job
  // failed. Never blocks on the network.
  void Submit(const GemmArgs& args, float* c_out, GemmCallback done);

  // Half-closes the stream once every submitted job is sent and waits for
  // all of them to end and their callbacks to return. Returns the stream's
  // final status (per-job errors go to the callbacks).
  absl::Status Finish();

 private:
  class Reactor;
  JobStream(std::shared_ptr<Reactor> reactor, std::string target);

  std::shared_ptr<Reactor> reactor_;
  const std::string target_;
  std::atomic<bool> finished_{false};
};

}  // namespace gemm::client

#endif  // GEMM_CLIENT_LIB_JOB_STREAM_H_
