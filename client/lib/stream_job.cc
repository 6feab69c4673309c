#include "client/lib/stream_job.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace gemm::client {

StreamJob::StreamJob(uint64_t id, const GemmArgs& args, float* c_out,
                     GemmCallback done)
    : id_(id),
      args_(args),
      c_out_(c_out),
      done_(std::move(done)),
      c_bytes_(ResultBytes(args)) {}

void StreamJob::SkipSentOperands() {
  while (operand_ <= v1::OPERAND_C &&
         offset_ >= OperandBytes(args_, static_cast<v1::Operand>(operand_))) {
    ++operand_;
    offset_ = 0;
  }
}

bool StreamJob::NextMessage(const StreamMessageLimits& limits,
                            grpc::ByteBuffer* out) {
  if (!params_sent_ && JobBytes(args_) <= limits.whole_job_max_bytes) {
    // The whole job in one message.
    v1::GemmParams params = ParamsOf(args_);
    params.set_inline_result_max_bytes(limits.inline_result_max_bytes);
    *out = wire::EncodeWholeJob(id_, params, OperandsOf(args_));
    params_sent_ = true;
    operand_ = v1::OPERAND_C + 1;
    return true;
  }
  v1::StreamRequest header;
  header.set_job_id(id_);
  if (!params_sent_) {
    *header.mutable_params() = ParamsOf(args_);
    header.mutable_params()->set_inline_result_max_bytes(
        limits.inline_result_max_bytes);
    params_sent_ = true;
  }
  SkipSentOperands();
  absl::string_view data;
  if (operand_ <= v1::OPERAND_C) {
    const auto op = static_cast<v1::Operand>(operand_);
    const uint64_t n =
        std::min(limits.chunk_bytes, OperandBytes(args_, op) - offset_);
    header.set_operand(op);
    header.set_offset(offset_);
    data = absl::string_view(
        reinterpret_cast<const char*>(OperandData(args_, op)) + offset_, n);
    offset_ += n;
    SkipSentOperands();
  }
  const bool last = operand_ > v1::OPERAND_C;
  if (last) header.set_end_of_job(true);
  *out = wire::EncodeStreamRequest(header, data);
  return last;
}

void StreamJob::AcceptChunk(uint64_t offset, const wire::Pieces& data) {
  if (!bad_chunk_.ok()) return;
  if (offset > c_bytes_ || data.size > c_bytes_ - offset) {
    bad_chunk_ = absl::InternalError(absl::StrFormat(
        "job %d: server sent a result chunk of %d bytes at offset %d, past "
        "the end of C (%d bytes)",
        id_, data.size, offset, c_bytes_));
    return;
  }
  // The one copy of a result byte on the client: from the received slices
  // into the caller's c_out.
  data.CopyTo(reinterpret_cast<char*>(c_out_) + offset);
  c_received_ += data.size;
}

absl::StatusOr<v1::Timing> StreamJob::End(const v1::JobEnd& end,
                                          const wire::Pieces& inline_c) {
  if (end.code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(end.code()),
                        end.message());
  }
  if (!bad_chunk_.ok()) return bad_chunk_;
  uint64_t received = c_received_;
  if (inline_c.size > 0 && c_received_ == 0) {
    // The result came inside the end record (inline_result_max_bytes).
    if (inline_c.size == c_bytes_) {
      inline_c.CopyTo(reinterpret_cast<char*>(c_out_));
    }
    received = inline_c.size;
  }
  if (received != c_bytes_) {
    return absl::InternalError(
        absl::StrFormat("job %d: server sent %d bytes of C, expected %d", id_,
                        received, c_bytes_));
  }
  return end.timing();
}

void StreamJob::Restart(uint64_t id) {
  id_ = id;
  ++attempt_;
  params_sent_ = false;
  operand_ = v1::OPERAND_A;
  offset_ = 0;
  c_received_ = 0;
  bad_chunk_ = absl::OkStatus();
}

}  // namespace gemm::client
