// JobRegion: a region for a command's jobs (gemm-client run and load
// --memory shm|cuda-ipc): a POSIX shared-memory object (shm_region.h) or
// device memory exported by CUDA IPC (cuda_ipc_region.h, in builds with
// CUDA), registered with the client's servers under a name of its own and
// unregistered when the JobRegion goes. Space in it is handed out by
// Reserve(); operands are written with Write() and results read back with
// Read().
//
// Thread-safety: Reserve() is thread-safe; Write() and Read() are, for
// disjoint bytes.
//
//   ASSIGN_OR_RETURN(auto region, JobRegion::Create(client, kShm, bytes));
//   uint64_t a = *region->Reserve(4 * a_elements);
//   RETURN_IF_ERROR(region->Write(a, a_data, 4 * a_elements));
//   args.a_region = region->At(a);
#ifndef GEMM_CLIENT_LIB_JOB_REGION_H_
#define GEMM_CLIENT_LIB_JOB_REGION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/lib/gemm_client.h"

namespace gemm::client {

// Where a command's operands and results travel.
enum class OperandMemory {
  kMessages,  // in the gRPC messages (the socket)
  kShm,       // in a system shared-memory region
  kCudaIpc,   // in GPU memory shared by CUDA IPC
};

// "socket", "shm" or "cuda-ipc" to OperandMemory.
absl::StatusOr<OperandMemory> OperandMemoryNamed(const std::string& name);
const char* OperandMemoryName(OperandMemory memory);
// Whether this build of the client can use `memory` (CUDA IPC needs a build
// with CUDA).
bool OperandMemoryAvailable(OperandMemory memory);

class JobRegion {
 public:
  // `bytes` of `memory` (kShm or kCudaIpc; CUDA device 0), registered with
  // every server of `client`.
  static absl::StatusOr<std::unique_ptr<JobRegion>> Create(GemmClient* client,
                                                           OperandMemory memory,
                                                           uint64_t bytes);
  ~JobRegion();  // unregisters and frees

  // `bytes` more of the region, 256-byte aligned; OUT_OF_RANGE when full.
  absl::StatusOr<uint64_t> Reserve(uint64_t bytes);
  // The reference GemmArgs takes for bytes at `offset`.
  RegionOffset At(uint64_t offset) const { return {name_, offset}; }

  absl::Status Write(uint64_t offset, const void* from, uint64_t bytes);
  absl::Status Read(uint64_t offset, void* to, uint64_t bytes) const;
  // Reserve(bytes), then Write(data) there: the reference to the copy.
  absl::StatusOr<RegionOffset> Place(const void* data, uint64_t bytes);

  const std::string& name() const { return name_; }
  OperandMemory memory() const { return memory_; }
  uint64_t size() const { return size_; }

  // Where the bytes are: shm or CUDA IPC (job_region.cc).
  class Memory;

 private:
  JobRegion() = default;

  GemmClient* client_ = nullptr;
  OperandMemory memory_ = OperandMemory::kShm;
  std::string name_;
  uint64_t size_ = 0;
  std::unique_ptr<Memory> impl_;
  std::atomic<uint64_t> used_{0};
};

// Equal slots of a JobRegion, handed out and taken back (gemm-client load's
// result slots). Thread-safe.
class RegionSlots {
 public:
  // Reserves up to `count` slots of `bytes` each (fewer when the region
  // fills up).
  void Reserve(JobRegion* region, uint64_t count, uint64_t bytes);
  // A free slot's offset in the region, or -1 when none is free.
  int64_t Take();
  // Returns a slot from Take(); -1 is ignored.
  void Give(int64_t offset);

 private:
  absl::Mutex mu_;
  std::vector<int64_t> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gemm::client

#endif  // GEMM_CLIENT_LIB_JOB_REGION_H_
