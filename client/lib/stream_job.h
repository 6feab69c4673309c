// StreamJob: one job on a GemmStream, seen from the client. It cuts the
// job into request messages (one whole-job message, or its params followed
// by its operands in chunks) and puts the result back together in the
// caller's c_out, from ResultChunks or from the JobEnd itself, refusing any
// chunk that would write outside C.
//
// Thread-safety: none; JobStream's reactor guards its jobs with its mutex.
//
//   StreamJob job(/*id=*/1, args, c_out, std::move(done));
//   while (!job.NextMessage(limits, &message)) Write(message);  // then the
//   last absl::StatusOr<v1::Timing> outcome = job.End(response.end,
//   response.data);
#ifndef GEMM_CLIENT_LIB_STREAM_JOB_H_
#define GEMM_CLIENT_LIB_STREAM_JOB_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/lib/gemm_args.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/gemm.pb.h"
#include "proto/wire_codec.h"

namespace gemm::client {

// How a stream cuts jobs into messages.
struct StreamMessageLimits {
  // Size of the chunks operands are cut into.
  uint64_t chunk_bytes = uint64_t{1} << 20;
  // Jobs whose A, B and C together are at most this go as one message.
  uint64_t whole_job_max_bytes = uint64_t{1} << 20;
  // Sent in the params: results up to this size may come back inside the
  // JobEnd.
  uint64_t inline_result_max_bytes = uint64_t{1} << 20;
};

class StreamJob {
 public:
  StreamJob(uint64_t id, const GemmArgs& args, float* c_out, GemmCallback done);

  uint64_t id() const { return id_; }
  // Counts from 1.
  int attempt() const { return attempt_; }

  // Builds the job's next request message, copying its operand bytes once,
  // straight into the message. Returns true when it was the job's last one.
  bool NextMessage(const StreamMessageLimits& limits, grpc::ByteBuffer* out);

  // A ResultChunk of this job: copied into c_out when it lies within C;
  // otherwise nothing is written and the job will fail at its end.
  void AcceptChunk(uint64_t offset, const wire::Pieces& data);

  // The job's JobEnd, with its inline result (JobEnd.c) in `inline_c`: the
  // server's timing, or why the job failed (the server's error, a chunk
  // outside C, or a result of the wrong size).
  absl::StatusOr<v1::Timing> End(const v1::JobEnd& end,
                                 const wire::Pieces& inline_c);

  // Makes the job new again for its next attempt, under a new id: all of it
  // is to be sent and none of the result has come.
  void Restart(uint64_t id);

  // The caller's callback, taken out to be run once.
  GemmCallback TakeCallback() { return std::move(done_); }

 private:
  // Moves the cursor past operands with nothing (left) to send.
  void SkipSentOperands();

  uint64_t id_;
  GemmArgs args_;
  float* c_out_;
  GemmCallback done_;
  uint64_t c_bytes_;
  int attempt_ = 1;
  // Sending: whether the params went, and the next byte to send.
  bool params_sent_ = false;
  int operand_ = v1::OPERAND_A;
  uint64_t offset_ = 0;
  // Receiving: result bytes written to c_out, and the first chunk refused.
  uint64_t c_received_ = 0;
  absl::Status bad_chunk_;
};

}  // namespace gemm::client

#endif  // GEMM_CLIENT_LIB_STREAM_JOB_H_
