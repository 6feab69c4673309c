// A GEMM job as the server holds it between the network and an executor.
//
// A job owns its operands in host memory, its deadline, its timings and the
// callback that hands its result back to the RPC that brought it. It is
// shared (std::shared_ptr) between the RPC reactor, the BatchScheduler and an
// Executor; Finish() runs the callback exactly once, from whichever thread
// ends the job.
//
//   auto job = std::make_shared<GemmJob>(spec, std::move(reservation));
//   job->set_done_callback([](GemmJob& j, absl::Status s) { ... j.c() ... });
//   scheduler->Submit(job);
#ifndef GEMM_SERVER_CORE_GEMM_JOB_H_
#define GEMM_SERVER_CORE_GEMM_JOB_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/gemm_problem.h"
#include "common/precision.h"
#include "server/core/client_shares.h"
#include "server/core/kernel_handle.h"

namespace gemm::server {

// Bytes of a caller's region, as a job's params name them
// (GemmParams.a_region ... result_region; region_registry.h).
struct RegionRef {
  // Empty: the operand is not in a region.
  std::string region;
  uint64_t offset = 0;
  bool used() const { return !region.empty(); }
};

// An accepted job's request: the problem, the kernel that will run it and
// its time budget.
struct JobSpec {
  GemmProblem problem;
  // The kernel its backend resolved ("auto" and names are gone once the
  // job is accepted).
  KernelHandle kernel;
  // Budget from the moment the job is complete; zero means none.
  absl::Duration timeout = absl::ZeroDuration();
  // Check the result before returning it (ABFT: common/abft.h). Never set
  // for K = 0, which multiplies nothing.
  bool check = false;
  // Operands and result in regions (c_region only when beta is not 0).
  RegionRef a_region;
  RegionRef b_region;
  RegionRef c_region;
  RegionRef result_region;

  // Jobs with equal batch keys can run as one batched launch.
  bool SameBatchAs(const JobSpec& other) const;
};

// What a job's result check found; see proto/gemm.proto's CheckRecord.
struct JobCheck {
  bool ran = false;
  absl::Duration time = absl::ZeroDuration();
  uint32_t mismatches = 0;
  double worst_ratio = 0;
  uint64_t unchecked_lines = 0;
  std::string detail;
  // The kernel whose result was returned, when a re-run replaced the
  // first result; no kernel otherwise.
  KernelHandle rerun_kernel;
};

// Where a job's time went; see proto/gemm.proto's Timing.
struct JobTiming {
  absl::Duration queued = absl::ZeroDuration();
  absl::Duration h2d = absl::ZeroDuration();
  absl::Duration compute = absl::ZeroDuration();
  absl::Duration d2h = absl::ZeroDuration();
  absl::Duration server = absl::ZeroDuration();
  uint32_t batch_size = 1;
  std::string device;
  JobCheck check;
  // The arithmetic of the kernel whose result is returned.
  Precision precision = Precision::kFp32;
};

// C = beta * C over `elements` floats, the whole of a GEMM with K = 0:
// beta 0 writes zeros whatever C held (NaN and Inf included, as BLAS does).
void ScaleByBeta(float* c, uint64_t elements, float beta);

// Counts the bytes of accepted, unfinished jobs against a limit. Thread-safe.
class InflightBudget {
 public:
  // `on_release` (may be empty) runs after bytes are given back, or a
  // claim's job is answered (Reservation::MarkAnswered), on the thread that
  // gave them back.
  explicit InflightBudget(uint64_t limit_bytes,
                          std::function<void()> on_release = nullptr)
      : limit_(limit_bytes), on_release_(std::move(on_release)) {}

  // A claim on part of the budget, returned when destroyed.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(InflightBudget* budget, uint64_t bytes,
                std::shared_ptr<ClientShare> share = nullptr)
        : budget_(budget), bytes_(bytes), share_(std::move(share)) {}
    Reservation(Reservation&& other) noexcept { *this = std::move(other); }
    Reservation& operator=(Reservation&& other) noexcept;
    ~Reservation();
    uint64_t bytes() const { return bytes_; }
    // The claiming client; empty when the claim names none.
    const std::string& client() const;
    // The claim's job is answered: the client's share counts it as an
    // answer not yet sent from now (ClientShare::Answered), and gives it
    // and its bytes back when the claim ends; once, and not concurrently
    // with itself.
    void MarkAnswered();

   private:
    InflightBudget* budget_ = nullptr;
    uint64_t bytes_ = 0;
    std::shared_ptr<ClientShare> share_;
    // MarkAnswered() has run: the share counts an answer, not a job.
    bool answered_ = false;
  };

  // UNAVAILABLE when `bytes` more would exceed the limit right now, or
  // `share`'s (the claiming client's; may be null).
  absl::Status Reserve(uint64_t bytes, Reservation* reservation,
                       std::shared_ptr<ClientShare> share = nullptr);
  uint64_t used() const { return used_.load(); }
  uint64_t limit() const { return limit_; }

 private:
  void Release(uint64_t bytes);
  // Runs on_release_: room may have freed up outside the budget (a share).
  void Notify();

  const uint64_t limit_;
  const std::function<void()> on_release_;
  std::atomic<uint64_t> used_{0};
};

// Where a job's operands live in host memory. The CUDA backend supplies one
// that hands out pinned (page-locked) blocks, so that the service's copy of
// the request bytes lands directly in memory the GPU's copy engines can
// read. Thread-safe implementations only.
class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  // At least `bytes` bytes, 64-byte aligned; nullptr when none can be had.
  virtual void* Allocate(uint64_t bytes) = 0;
  // Returns a block from Allocate(`bytes`).
  virtual void Free(void* block, uint64_t bytes) = 0;
};

// One operand's host storage: from a HostAllocator, or from new[] when there
// is none (or it had nothing to give).
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(HostAllocator* allocator, uint64_t elements);
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer();
  // Allocates a buffer constructed empty.
  void Allocate(HostAllocator* allocator, uint64_t elements);
  // nullptr while empty.
  float* data() const { return data_; }
  // True when the block came from the allocator (pinned, for CUDA).
  bool from_allocator() const { return allocator_ != nullptr; }

 private:
  HostAllocator* allocator_ = nullptr;
  uint64_t bytes_ = 0;
  float* data_ = nullptr;
};

// A job's hold on a caller's region (region_registry.h): the region stays
// mapped while a hold on it lives.
class RegionHold {
 public:
  virtual ~RegionHold() = default;
  // OK while the region's memory is sound; FAILED_PRECONDITION, naming the
  // region, once its shared-memory object shrank under the mapping
  // (mapping_guard.h): whatever a job read or wrote there is lost.
  virtual absl::Status Intact() const = 0;
};

// An operand or result that lives in a caller's region instead of the
// job's own storage: host memory (a system shared-memory region, mapped
// here) or device memory (a CUDA IPC region, on CUDA device `ordinal`).
struct RegionSpan {
  std::shared_ptr<const RegionHold> hold;
  float* host = nullptr;
  float* device = nullptr;
  int ordinal = -1;
  bool used() const { return hold != nullptr; }
};

// Which of a job's operands and result are in regions.
struct JobRegions {
  RegionSpan a;
  RegionSpan b;
  RegionSpan c;  // the input C
  RegionSpan result;
  bool any() const { return a.used() || b.used() || c.used() || result.used(); }
};

class GemmJob {
 public:
  using DoneCallback = std::function<void(GemmJob& job, absl::Status status)>;

  // Allocates (uninitialized) host storage for A, B and C, from `allocator`
  // when given (it must outlive the job), else from the heap; operands and
  // the result that live in `regions` get none (C gets none only when both
  // the input C and the result are in regions).
  GemmJob(JobSpec spec, InflightBudget::Reservation reservation,
          HostAllocator* allocator = nullptr, JobRegions regions = {});
  GemmJob(const GemmJob&) = delete;
  GemmJob& operator=(const GemmJob&) = delete;

  const JobSpec& spec() const { return spec_; }
  const GemmProblem& problem() const { return spec_.problem; }
  // The client whose share the job claims (client_shares.h); empty when
  // none.
  const std::string& client() const { return reservation_.client(); }
  const KernelHandle& kernel() const { return spec_.kernel; }
  // The job's answer is being handed to gRPC: its client's share counts
  // it as an answer not yet sent instead of a job (its bytes count until
  // the job is gone), so that the client's next call, made once it has
  // the answer, never finds it among its jobs. Once, by the call that
  // answers.
  void ReleaseJobShare() { reservation_.MarkAnswered(); }

  // A and B in host memory: the job's storage or a system region; nullptr
  // when the operand is in device memory (a_device(), b_device()).
  float* a() { return regions_.a.used() ? regions_.a.host : a_.data(); }
  float* b() { return regions_.b.used() ? regions_.b.host : b_.data(); }
  // A and B in device memory (CUDA IPC regions), else nullptr.
  const RegionSpan& a_region() const { return regions_.a; }
  const RegionSpan& b_region() const { return regions_.b; }
  // The input C in host memory (read when beta is not 0): the job's
  // storage, or a system region; nullptr when it is in device memory.
  float* c_in() { return regions_.c.used() ? regions_.c.host : c_.data(); }
  const RegionSpan& c_region() const { return regions_.c; }
  // Where the result goes in host memory: the job's storage (which held the
  // input C, when that came with the request) or a system region; nullptr
  // when it goes to device memory (result_region().device).
  float* c() {
    return regions_.result.used() ? regions_.result.host : c_.data();
  }
  const float* c() const {
    return regions_.result.used() ? regions_.result.host : c_.data();
  }
  const RegionSpan& result_region() const { return regions_.result; }
  // True when the result goes to a region: no result bytes are sent.
  bool result_in_region() const { return spec_.result_region.used(); }
  // Whether a job of `spec` needs C storage of its own: for its result, or
  // for an input C sent with the request.
  static bool NeedsOwnC(const JobSpec& spec);
  // True when A and B use regions of device memory or none, and every
  // operand byte in the job's own storage came from the HostAllocator.
  bool host_storage_from_allocator() const {
    return (regions_.a.used() || a_.from_allocator()) &&
           (regions_.b.used() || b_.from_allocator()) &&
           (c_.data() == nullptr || c_.from_allocator());
  }
  // OK unless a region the job uses broke (RegionHold::Intact).
  absl::Status RegionsIntact() const;

  void set_done_callback(DoneCallback callback) { done_ = std::move(callback); }
  // Polled by the scheduler: a cancelled job is dropped before it runs.
  void set_cancel_check(std::function<bool()> check) {
    cancel_check_ = std::move(check);
  }
  bool IsCancelled() const;
  void Cancel() { cancelled_.store(true); }

  // Marks the job complete on the server: starts its clock and deadline.
  void MarkReady(absl::Time now);
  absl::Time ready_time() const { return ready_time_; }
  // The earlier of the job's own timeout and the call's deadline.
  absl::Time deadline() const { return deadline_; }
  void set_call_deadline(absl::Time deadline) { call_deadline_ = deadline; }

  JobTiming& timing() { return timing_; }
  const JobTiming& timing() const { return timing_; }

  // Runs the done callback once, then lets go of the job's regions (their
  // spans read as unused from then on); later calls do nothing.
  void Finish(absl::Status status);

 private:
  const JobSpec spec_;
  InflightBudget::Reservation reservation_;
  JobRegions regions_;
  HostBuffer a_;
  HostBuffer b_;
  HostBuffer c_;
  absl::Time ready_time_ = absl::InfinitePast();
  absl::Time call_deadline_ = absl::InfiniteFuture();
  absl::Time deadline_ = absl::InfiniteFuture();
  JobTiming timing_;
  std::function<bool()> cancel_check_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> finished_{false};
  DoneCallback done_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CORE_GEMM_JOB_H_
