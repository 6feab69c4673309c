#include "client/lib/job_region.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/lib/shm_region.h"
#include "common/host_id.h"
#ifdef GEMM_CLIENT_WITH_CUDA
#include "client/lib/cuda_ipc_region.h"
#endif

namespace gemm::client {

absl::StatusOr<OperandMemory> OperandMemoryNamed(const std::string& name) {
  if (name == "socket") return OperandMemory::kMessages;
  if (name == "shm") return OperandMemory::kShm;
  if (name == "cuda-ipc") return OperandMemory::kCudaIpc;
  return absl::InvalidArgumentError(
      absl::StrCat("--memory: '", name, "' is not socket, shm or cuda-ipc"));
}

const char* OperandMemoryName(OperandMemory memory) {
  switch (memory) {
    case OperandMemory::kMessages:
      return "socket";
    case OperandMemory::kShm:
      return "shm";
    default:
      return "cuda-ipc";
  }
}

bool OperandMemoryAvailable(OperandMemory memory) {
#ifdef GEMM_CLIENT_WITH_CUDA
  (void)memory;
  return true;
#else
  return memory != OperandMemory::kCudaIpc;
#endif
}

class JobRegion::Memory {
 public:
  virtual ~Memory() = default;
  virtual v1::RegisterRegionRequest Describe(const std::string& name) = 0;
  virtual absl::Status Write(uint64_t offset, const void* from,
                             uint64_t bytes) = 0;
  virtual absl::Status Read(uint64_t offset, void* to,
                            uint64_t bytes) const = 0;
};

namespace {

class ShmMemory : public JobRegion::Memory {
 public:
  explicit ShmMemory(std::unique_ptr<SharedMemoryRegion> shm)
      : shm_(std::move(shm)) {}
  v1::RegisterRegionRequest Describe(const std::string& name) override {
    return shm_->Describe(name);
  }
  absl::Status Write(uint64_t offset, const void* from,
                     uint64_t bytes) override {
    std::memcpy(shm_->data() + offset, from, bytes);
    return absl::OkStatus();
  }
  absl::Status Read(uint64_t offset, void* to, uint64_t bytes) const override {
    std::memcpy(to, shm_->data() + offset, bytes);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<SharedMemoryRegion> shm_;
};

#ifdef GEMM_CLIENT_WITH_CUDA
class IpcMemory : public JobRegion::Memory {
 public:
  explicit IpcMemory(std::unique_ptr<CudaIpcRegion> gpu)
      : gpu_(std::move(gpu)) {}
  v1::RegisterRegionRequest Describe(const std::string& name) override {
    return gpu_->Describe(name);
  }
  absl::Status Write(uint64_t offset, const void* from,
                     uint64_t bytes) override {
    return gpu_->Upload(offset, from, bytes);
  }
  absl::Status Read(uint64_t offset, void* to, uint64_t bytes) const override {
    return gpu_->Download(offset, to, bytes);
  }

 private:
  std::unique_ptr<CudaIpcRegion> gpu_;
};
#endif

}  // namespace

absl::StatusOr<std::unique_ptr<JobRegion>> JobRegion::Create(
    GemmClient* client, OperandMemory memory, uint64_t bytes) {
  static std::atomic<uint64_t> next{0};
  std::unique_ptr<JobRegion> region(new JobRegion());
  region->memory_ = memory;
  region->size_ = bytes;
  // Unique per process and region; the host's id keeps callers in other
  // containers (whose pids may repeat) apart.
  region->name_ =
      absl::StrCat("gemm-client-", ReadHostId().substr(0, 8), "-", getpid(),
                   "-", OperandMemoryName(memory), "-", next++);
  if (memory == OperandMemory::kShm) {
    auto shm = SharedMemoryRegion::Create(
        SharedMemoryRegion::UniqueKey("client"), bytes);
    if (!shm.ok()) return shm.status();
    region->impl_ = std::make_unique<ShmMemory>(std::move(*shm));
  } else if (memory == OperandMemory::kCudaIpc) {
#ifdef GEMM_CLIENT_WITH_CUDA
    auto gpu = CudaIpcRegion::Create(bytes, 0);
    if (!gpu.ok()) return gpu.status();
    region->impl_ = std::make_unique<IpcMemory>(std::move(*gpu));
#else
    return absl::UnimplementedError(
        "--memory cuda-ipc: this gemm-client was built without CUDA");
#endif
  } else {
    return absl::InvalidArgumentError("a JobRegion needs shm or cuda-ipc");
  }
  auto info = client->RegisterRegion(region->impl_->Describe(region->name_));
  if (!info.ok()) return info.status();
  // Only a registered region is unregistered when it goes.
  region->client_ = client;
  return region;
}

JobRegion::~JobRegion() {
  if (client_ != nullptr && impl_ != nullptr) {
    client_->UnregisterRegion(name_).IgnoreError();
  }
}

absl::StatusOr<uint64_t> JobRegion::Reserve(uint64_t bytes) {
  const uint64_t rounded = (bytes + 255) / 256 * 256;
  uint64_t used = used_.load();
  do {
    if (rounded > size_ || used > size_ - rounded) {
      return absl::OutOfRangeError(
          absl::StrCat("region ", name_, " is full: ", used, " of ", size_,
                       " bytes used, ", bytes, " more asked"));
    }
  } while (!used_.compare_exchange_weak(used, used + rounded));
  return used;
}

absl::Status JobRegion::Write(uint64_t offset, const void* from,
                              uint64_t bytes) {
  return impl_->Write(offset, from, bytes);
}

absl::Status JobRegion::Read(uint64_t offset, void* to, uint64_t bytes) const {
  return impl_->Read(offset, to, bytes);
}

absl::StatusOr<RegionOffset> JobRegion::Place(const void* data,
                                              uint64_t bytes) {
  absl::StatusOr<uint64_t> at = Reserve(bytes);
  if (!at.ok()) return at.status();
  absl::Status written = Write(*at, data, bytes);
  if (!written.ok()) return written;
  return At(*at);
}

void RegionSlots::Reserve(JobRegion* region, uint64_t count, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  for (uint64_t i = 0; i < count; ++i) {
    absl::StatusOr<uint64_t> at = region->Reserve(bytes);
    if (!at.ok()) return;
    free_.push_back(static_cast<int64_t>(*at));
  }
}

int64_t RegionSlots::Take() {
  absl::MutexLock lock(&mu_);
  if (free_.empty()) return -1;
  const int64_t offset = free_.back();
  free_.pop_back();
  return offset;
}

void RegionSlots::Give(int64_t offset) {
  if (offset < 0) return;
  absl::MutexLock lock(&mu_);
  free_.push_back(offset);
}

}  // namespace gemm::client
