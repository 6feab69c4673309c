#include "server/core/gemm_job.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace gemm::server {

bool JobSpec::SameBatchAs(const JobSpec& other) const {
  // alpha and beta are compared bitwise: a batched launch takes one of each.
  return problem.SameShapeAs(other.problem) && kernel == other.kernel &&
         check == other.check &&
         std::memcmp(&problem.alpha, &other.problem.alpha, sizeof(float)) ==
             0 &&
         std::memcmp(&problem.beta, &other.problem.beta, sizeof(float)) == 0;
}

void ScaleByBeta(float* c, uint64_t elements, float beta) {
  if (beta == 0.0f) {
    std::fill_n(c, elements, 0.0f);
  } else {
    for (uint64_t i = 0; i < elements; ++i) c[i] *= beta;
  }
}

InflightBudget::Reservation& InflightBudget::Reservation::operator=(
    Reservation&& other) noexcept {
  if (this != &other) {
    if (share_ != nullptr) share_->Give(bytes_, answered_);
    if (budget_ != nullptr) budget_->Release(bytes_);
    budget_ = other.budget_;
    bytes_ = other.bytes_;
    share_ = std::move(other.share_);
    answered_ = other.answered_;
    other.budget_ = nullptr;
    other.bytes_ = 0;
    other.share_ = nullptr;
    other.answered_ = false;
  }
  return *this;
}

const std::string& InflightBudget::Reservation::client() const {
  static const std::string* const kNone = new std::string();
  return share_ != nullptr ? share_->client() : *kNone;
}

void InflightBudget::Reservation::MarkAnswered() {
  if (share_ == nullptr || answered_) return;
  answered_ = true;
  share_->Answered();
  // A stream waiting for its client's share may go on.
  if (budget_ != nullptr) budget_->Notify();
}

InflightBudget::Reservation::~Reservation() {
  // The client's share first: a stream woken by the release finds it free.
  if (share_ != nullptr) share_->Give(bytes_, answered_);
  if (budget_ != nullptr) budget_->Release(bytes_);
}

void InflightBudget::Release(uint64_t bytes) {
  used_.fetch_sub(bytes);
  Notify();
}

void InflightBudget::Notify() {
  if (on_release_) on_release_();
}

absl::Status InflightBudget::Reserve(uint64_t bytes, Reservation* reservation,
                                     std::shared_ptr<ClientShare> share) {
  if (share != nullptr) {
    absl::Status taken = share->Take(bytes);
    if (!taken.ok()) return taken;
  }
  uint64_t used = used_.load();
  do {
    // A job larger than the whole budget is refused earlier, by the size
    // limits; here the budget is merely full for now.
    if (bytes > limit_ || used > limit_ - bytes) {
      if (share != nullptr) share->Give(bytes);
      return absl::UnavailableError(absl::StrFormat(
          "server overloaded: %d bytes of jobs in flight, limit %d; retry "
          "later",
          used, limit_));
    }
  } while (!used_.compare_exchange_weak(used, used + bytes));
  *reservation = Reservation(this, bytes, std::move(share));
  return absl::OkStatus();
}

HostBuffer::HostBuffer(HostAllocator* allocator, uint64_t elements) {
  Allocate(allocator, elements);
}

void HostBuffer::Allocate(HostAllocator* allocator, uint64_t elements) {
  bytes_ = 4 * std::max<uint64_t>(1, elements);
  if (allocator != nullptr) {
    data_ = static_cast<float*>(allocator->Allocate(bytes_));
    if (data_ != nullptr) allocator_ = allocator;
  }
  if (data_ == nullptr) data_ = new float[bytes_ / 4];
}

HostBuffer::~HostBuffer() {
  if (allocator_ != nullptr) {
    allocator_->Free(data_, bytes_);
  } else {
    delete[] data_;
  }
}

GemmJob::GemmJob(JobSpec spec, InflightBudget::Reservation reservation,
                 HostAllocator* allocator, JobRegions regions)
    : spec_(std::move(spec)),
      reservation_(std::move(reservation)),
      regions_(std::move(regions)) {
  const GemmProblem& p = spec_.problem;
  if (!regions_.a.used()) a_.Allocate(allocator, p.a_elements());
  if (!regions_.b.used()) b_.Allocate(allocator, p.b_elements());
  if (NeedsOwnC(spec_)) c_.Allocate(allocator, p.c_elements());
}

bool GemmJob::NeedsOwnC(const JobSpec& spec) {
  // For the result, or for an input C that comes with the request.
  return !spec.result_region.used() ||
         (spec.problem.beta != 0.0f && !spec.c_region.used());
}

absl::Status GemmJob::RegionsIntact() const {
  for (const RegionSpan* span :
       {&regions_.a, &regions_.b, &regions_.c, &regions_.result}) {
    if (!span->used()) continue;
    absl::Status intact = span->hold->Intact();
    if (!intact.ok()) return intact;
  }
  return absl::OkStatus();
}

bool GemmJob::IsCancelled() const {
  return cancelled_.load() || (cancel_check_ && cancel_check_());
}

void GemmJob::MarkReady(absl::Time now) {
  ready_time_ = now;
  deadline_ = call_deadline_;
  if (spec_.timeout > absl::ZeroDuration()) {
    deadline_ = std::min(deadline_, now + spec_.timeout);
  }
}

void GemmJob::Finish(absl::Status status) {
  if (finished_.exchange(true)) return;
  DoneCallback done = std::move(done_);
  if (done) done(*this, std::move(status));
  // The job is over with the callers' regions: its holds go now, on this
  // thread, rather than wherever the job's last reference drops (a result
  // in flight may hold it in one of gRPC's slices).
  const JobRegions held = std::move(regions_);
  regions_ = JobRegions();
}

}  // namespace gemm::server
