// The seam between scheduling and computing: an Executor runs batches of
// accepted jobs on one backend (OpenBLAS on the CPU, a CUDA device, ...).
//
// Thread-safety: every method may be called from several threads at once;
// Execute() is called by the BatchScheduler's workers.
//
//   std::unique_ptr<Executor> executor = ...;
//   ASSIGN_OR_RETURN(KernelHandle kernel,
//                    executor->ResolveKernel(problem, "auto"));
//   absl::Status s = executor->Execute(batch);  // fills C and timings
#ifndef GEMM_SERVER_CORE_EXECUTOR_H_
#define GEMM_SERVER_CORE_EXECUTOR_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/precision.h"
#include "server/core/gemm_job.h"
#include "server/core/kernel_handle.h"

namespace gemm::server {

struct DeviceDescription {
  std::string id;    // "cpu", "cuda:0"
  std::string name;  // "OpenBLAS 0.3.21 (2 threads)", "NVIDIA H200"
  uint64_t memory_bytes = 0;
  std::string compute_capability;  // "9.0"; empty on the CPU
  // Empty while the device serves; else why it was taken out of service
  // (a sticky CUDA error).
  std::string failure;
  // Results from this device that failed their check (GemmJob's
  // JobSpec::check), since the executor started.
  uint64_t check_mismatches = 0;
};

// Where a job's result sits after its GEMM (and before its check): host
// memory on the CPU, device memory on CUDA (`cuda_stream` is then the
// cudaStream_t that computed it). `run` is 0 for the first run, 1 for the
// re-run after a failed check.
struct ResultSite {
  GemmJob* job = nullptr;
  float* c = nullptr;
  void* cuda_stream = nullptr;
  int run = 0;
};
// A test seam: changes a result after the GEMM, before any check reads it
// (flips a bit, as a faulty device would); called for every job, checked or
// not. Production code never sets one.
using ResultCorrupter = std::function<void(const ResultSite& site)>;

// What a backend holds in memory now, for the metrics; empty on the CPU.
struct MemoryUse {
  struct Device {
    std::string id;  // "cuda:0"
    // Operand memory handed to batches, and cached for reuse, under the
    // device's budget (device_memory_pool.h).
    uint64_t in_use_bytes = 0;
    uint64_t cached_bytes = 0;
    uint64_t budget_bytes = 0;
  };
  std::vector<Device> devices;
  // Page-locked host memory for jobs (pinned_host_pool.h): held by jobs,
  // the pool's size, and the blocks it had no room for (pageable instead).
  uint64_t pinned_in_use_bytes = 0;
  uint64_t pinned_pool_bytes = 0;
  uint64_t pinned_pageable_blocks = 0;
};

// GPU memory of a CUDA IPC region, opened in this process
// (Executor::OpenIpcRegion).
struct IpcMemory {
  void* pointer = nullptr;
  // The CUDA ordinal of the device it is on, in this process.
  int ordinal = -1;
  // Its id in devices(), e.g. "cuda:0".
  std::string device_id;
};

// Jobs that run together; all satisfy JobSpec::SameBatchAs with the first.
using Batch = std::vector<std::shared_ptr<GemmJob>>;

class Executor {
 public:
  virtual ~Executor() = default;

  // "cpu" or "cuda".
  virtual absl::string_view backend() const = 0;
  virtual std::vector<DeviceDescription> devices() const = 0;
  // The names a job may ask for, besides "auto".
  virtual std::vector<std::string> kernels() const = 0;
  // The same kernels with their precision; by default every one float32.
  virtual std::vector<KernelDescription> kernel_details() const {
    std::vector<KernelDescription> details;
    for (std::string& name : kernels()) {
      details.push_back(KernelDescription{std::move(name)});
    }
    return details;
  }

  // Maps a requested kernel ("auto", "" or a name) and precision to the
  // kernel that will run `problem`, a handle into this executor's table
  // (kernel_handle.h) that Execute runs without looking up a name:
  // INVALID_ARGUMENT for an unknown name or a kernel of another precision,
  // UNIMPLEMENTED for a precision no kernel of the backend computes in.
  virtual absl::StatusOr<KernelHandle> ResolveKernel(
      const GemmProblem& problem, absl::string_view requested,
      Precision precision = Precision::kFp32) const = 0;

  // Runs every job of `batch`: computes C in place and fills the timings
  // (all but queued and server, which the scheduler owns). A non-OK status
  // fails the whole batch. Never called with an empty batch.
  virtual absl::Status Execute(const Batch& batch) = 0;

  // Called once on each scheduler worker thread before its first batch, to
  // create per-thread state (cuBLAS handles, say) off the hot path. Failures
  // are logged and left for Execute() to report.
  virtual absl::Status PrepareWorkerThread() { return absl::OkStatus(); }

  // Device and pinned host memory held now (read by metrics scrapes).
  virtual MemoryUse memory_use() const { return MemoryUse(); }

  // False once no device can take a batch (every GPU failed): the server
  // then stops (gemm_server.h).
  virtual bool serviceable() const { return true; }

  // Test seam (see ResultCorrupter): set before the first batch runs.
  // Executors without checks ignore it.
  virtual void SetResultCorrupterForTesting(ResultCorrupter corrupter) {
    (void)corrupter;
  }

  // Regions (region_registry.h). Registers the host memory of a system
  // shared-memory region with the backend's driver, so that copies run
  // straight from and to it (cudaHostRegister): true when registered, false
  // when the backend has no use for it (the CPU reads it in place).
  // `read_only`: the mapping may not be written.
  virtual absl::StatusOr<bool> PinHostRegion(void* base, uint64_t bytes,
                                             bool read_only) {
    (void)base;
    (void)bytes;
    (void)read_only;
    return false;
  }
  // Undoes a PinHostRegion that returned true.
  virtual void UnpinHostRegion(void* base) { (void)base; }
  // Opens a CUDA IPC handle (cudaIpcMemHandle_t's bytes) of `bytes` bytes
  // on the device with `device_uuid`. UNIMPLEMENTED on a backend without
  // CUDA; INVALID_ARGUMENT when the handle or device is wrong.
  virtual absl::StatusOr<IpcMemory> OpenIpcRegion(absl::string_view handle,
                                                  absl::string_view device_uuid,
                                                  uint64_t bytes) {
    (void)handle;
    (void)device_uuid;
    (void)bytes;
    return absl::UnimplementedError(absl::StrCat(
        "the ", std::string(backend()),
        " backend has no CUDA device: CUDA IPC regions need a server on the "
        "cuda backend; use a system shared-memory region"));
  }
  // Closes memory from OpenIpcRegion.
  virtual void CloseIpcRegion(const IpcMemory& memory) { (void)memory; }
};

// Wraps an executor in another (a test build injects failures this way);
// returns the executor the server uses from then on.
using ExecutorDecorator =
    std::function<std::unique_ptr<Executor>(std::unique_ptr<Executor>)>;

// An Executor that passes every call to the one it wraps: the base of a
// decorator, which overrides only what it changes.
class ForwardingExecutor : public Executor {
 public:
  explicit ForwardingExecutor(std::unique_ptr<Executor> inner)
      : inner_(std::move(inner)) {}

  absl::string_view backend() const override { return inner_->backend(); }
  std::vector<DeviceDescription> devices() const override {
    return inner_->devices();
  }
  std::vector<std::string> kernels() const override {
    return inner_->kernels();
  }
  std::vector<KernelDescription> kernel_details() const override {
    return inner_->kernel_details();
  }
  absl::StatusOr<KernelHandle> ResolveKernel(
      const GemmProblem& problem, absl::string_view requested,
      Precision precision = Precision::kFp32) const override {
    return inner_->ResolveKernel(problem, requested, precision);
  }
  absl::Status Execute(const Batch& batch) override {
    return inner_->Execute(batch);
  }
  absl::Status PrepareWorkerThread() override {
    return inner_->PrepareWorkerThread();
  }
  MemoryUse memory_use() const override { return inner_->memory_use(); }
  bool serviceable() const override { return inner_->serviceable(); }
  void SetResultCorrupterForTesting(ResultCorrupter corrupter) override {
    inner_->SetResultCorrupterForTesting(std::move(corrupter));
  }
  absl::StatusOr<bool> PinHostRegion(void* base, uint64_t bytes,
                                     bool read_only) override {
    return inner_->PinHostRegion(base, bytes, read_only);
  }
  void UnpinHostRegion(void* base) override { inner_->UnpinHostRegion(base); }
  absl::StatusOr<IpcMemory> OpenIpcRegion(absl::string_view handle,
                                          absl::string_view device_uuid,
                                          uint64_t bytes) override {
    return inner_->OpenIpcRegion(handle, device_uuid, bytes);
  }
  void CloseIpcRegion(const IpcMemory& memory) override {
    inner_->CloseIpcRegion(memory);
  }

 protected:
  Executor& inner() const { return *inner_; }

 private:
  const std::unique_ptr<Executor> inner_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_CORE_EXECUTOR_H_
