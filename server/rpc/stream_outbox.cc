#include "server/rpc/stream_outbox.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/gemm.pb.h"
#include "proto/wire_codec.h"
#include "server/core/wire_timing.h"

namespace gemm::server {

bool StreamOutbox::FitsInline(const GemmProblem& problem,
                              uint64_t inline_result_max_bytes) const {
  return 4 * problem.c_elements() <=
         std::min(inline_result_max_bytes, result_chunk_bytes_);
}

void StreamOutbox::PushRejected(uint64_t job_id, absl::Status status,
                                const GemmProblem* problem) {
  counts_->CountRejected(status.code());
  if (events_ != nullptr) {
    events_->Refused(client_, absl::StrCat("stream job ", job_id), problem,
                     status);
  }
  queue_.push_back(Outgoing{job_id, std::move(status), nullptr, 0, false,
                            /*accepted=*/false});
}

void StreamOutbox::PushFailed(uint64_t job_id, absl::Status status,
                              const GemmJob& job) {
  if (events_ != nullptr) {
    events_->Failed(client_, absl::StrCat("stream job ", job_id),
                    &job.problem(), status);
  }
  queue_.push_back(Outgoing{job_id, std::move(status), nullptr, 0, false,
                            /*accepted=*/true, JobLabels::Of(job)});
}

void StreamOutbox::PushResult(uint64_t job_id, std::shared_ptr<GemmJob> job,
                              bool inline_result) {
  queue_.push_back(Outgoing{job_id, absl::OkStatus(), std::move(job), 0,
                            inline_result, /*accepted=*/true});
}

void StreamOutbox::Clear() {
  for (const Outgoing& out : queue_) {
    if (!out.accepted) continue;
    if (out.job != nullptr) {
      counts_->CountFailed(absl::StatusCode::kCancelled, *out.job);
    } else {
      counts_->CountFailed(absl::StatusCode::kCancelled, out.labels);
    }
  }
  queue_.clear();
}

grpc::ByteBuffer StreamOutbox::Next() {
  Outgoing& out = queue_.front();
  if (out.job != nullptr) {
    // A result written to the caller's region travels no bytes.
    const uint64_t total =
        out.job->result_in_region() ? 0 : 4 * out.job->problem().c_elements();
    if (!out.inline_result && out.offset < total) {
      const uint64_t n =
          std::min<uint64_t>(result_chunk_bytes_, total - out.offset);
      // No copy: the chunk's bytes are the job's C, kept alive by the
      // buffer until gRPC has sent them.
      grpc::ByteBuffer chunk = wire::EncodeResultChunk(
          out.job_id, out.offset,
          reinterpret_cast<const char*>(out.job->c()) + out.offset, n, out.job);
      out.offset += n;
      return chunk;
    }
  }
  v1::StreamResponse message;
  message.set_job_id(out.job_id);
  v1::JobEnd* end = message.mutable_end();
  if (out.job != nullptr) {
    // The job's last message: the client may send its next job as soon
    // as it has it.
    out.job->ReleaseJobShare();
    end->set_code(0);
    FillTiming(*out.job, end->mutable_timing());
    if (out.inline_result && !out.job->result_in_region()) {
      end->set_c(reinterpret_cast<const char*>(out.job->c()),
                 4 * out.job->problem().c_elements());
    }
  } else {
    end->set_code(static_cast<int>(out.status.code()));
    end->set_message(std::string(out.status.message()));
  }
  if (out.job != nullptr) {
    counts_->CountDelivered(*out.job);
  } else if (out.accepted) {
    counts_->CountFailed(out.status.code(), out.labels);
  }
  queue_.pop_front();
  return wire::EncodeMessage(message);
}

}  // namespace gemm::server
