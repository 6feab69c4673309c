#include "server/admission/job_assembly.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/admission/validation.h"

namespace gemm::server {
namespace {

// Where an operand's bytes go in a job's host storage.
float* OperandData(GemmJob& job, v1::Operand operand) {
  switch (operand) {
    case v1::OPERAND_A:
      return job.a();
    case v1::OPERAND_B:
      return job.b();
    case v1::OPERAND_C:
      return job.c_in();
    default:
      return nullptr;
  }
}

}  // namespace

JobAssembly::JobAssembly(uint64_t job_id, std::shared_ptr<GemmJob> job,
                         uint64_t inline_result_max_bytes)
    : job_id_(job_id),
      job_(std::move(job)),
      inline_result_max_bytes_(inline_result_max_bytes) {}

absl::Status JobAssembly::Append(const wire::DecodedRequest& in) {
  const v1::StreamRequest& req = in.header;
  const v1::Operand op = req.operand();
  const JobSpec& spec = job_->spec();
  const RegionRef* region = op == v1::OPERAND_A   ? &spec.a_region
                            : op == v1::OPERAND_B ? &spec.b_region
                            : op == v1::OPERAND_C ? &spec.c_region
                                                  : nullptr;
  if (region != nullptr && region->used()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job_id ", req.job_id(), ": data: a chunk of ", v1::Operand_Name(op),
        ", but the job's params put it in region ",
        QuoteClientText(region->region), "; send one or the other"));
  }
  float* base = OperandData(*job_, op);
  if (region == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job_id ", req.job_id(),
        ": operand: must be OPERAND_A, OPERAND_B or OPERAND_C when data is "
        "set, got ",
        static_cast<int>(op)));
  }
  if (base == nullptr) {
    // C with beta 0 and the result in a region: nowhere to put it, and
    // nothing would read it.
    return absl::InvalidArgumentError(absl::StrCat(
        "job_id ", req.job_id(),
        ": data: a chunk of OPERAND_C, but beta is 0 and the result goes to "
        "a region, so C is not read; send none"));
  }
  const uint64_t expected = ExpectedBytes(spec, op);
  uint64_t& received = received_[op];
  if (req.offset() != received) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job_id %d: offset: chunks of %s must arrive in order; expected "
        "offset %d, got %d",
        req.job_id(), v1::Operand_Name(op), received, req.offset()));
  }
  if (received + in.data.size > expected) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "job_id %d: data: %s would grow to %d bytes, but the shape %s "
        "gives it %d",
        req.job_id(), v1::Operand_Name(op), received + in.data.size,
        job_->problem().ToString(), expected));
  }
  // The one copy of an operand byte on the server: from gRPC's slices into
  // the job's (pinned) storage.
  in.data.CopyTo(reinterpret_cast<char*>(base) + received);
  received += in.data.size;
  return absl::OkStatus();
}

absl::Status JobAssembly::CheckComplete() const {
  absl::Status s =
      CheckOperandBytes(job_->spec(), received_[v1::OPERAND_A],
                        received_[v1::OPERAND_B], received_[v1::OPERAND_C]);
  if (s.ok()) return s;
  return absl::InvalidArgumentError(
      absl::StrCat("job_id ", job_id_, ": ", s.message()));
}

}  // namespace gemm::server
