#include "server/regions/region_registry.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/host_id.h"
#include "common/status_macros.h"
#include "server/admission/validation.h"
#include "server/regions/shm_mapping.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

// cudaIpcMemHandle_t's size (CUDA_IPC_HANDLE_SIZE), without CUDA's headers.
constexpr size_t kIpcHandleBytes = 64;

}  // namespace

struct RegionRegistry::Region {
  Executor* executor = nullptr;
  std::string owner;
  std::string name;
  bool cuda_ipc = false;
  uint64_t size = 0;
  // System regions: the object's key, and its mapping.
  std::string key;
  std::unique_ptr<SharedMemoryMapping> shm;
  bool pinned = false;
  // CUDA IPC regions.
  IpcMemory ipc;

  // Guarded by the registry's mutex.
  uint32_t holds = 0;
  absl::Time last_used;
  bool retired = false;
  std::vector<std::function<void()>> on_unmapped;

  bool faulted() const { return shm != nullptr && shm->faulted(); }
  bool read_only() const { return shm != nullptr && shm->read_only(); }

  // Unpins, unmaps or closes; idempotent. Called with no hold left.
  void Unmap() {
    if (pinned) executor->UnpinHostRegion(shm->base());
    pinned = false;
    shm.reset();
    if (ipc.pointer != nullptr) executor->CloseIpcRegion(ipc);
    ipc = IpcMemory();
  }
  ~Region() { Unmap(); }
};

class RegionRegistry::HoldImpl : public RegionHold {
 public:
  HoldImpl(RegionRegistry* registry, std::shared_ptr<Region> region)
      : registry_(registry), region_(std::move(region)) {}
  ~HoldImpl() override { registry_->Release(region_.get()); }

  absl::Status Intact() const override {
    if (!region_->faulted()) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "region ", QuoteClientText(region_->name),
        " broke while the job used it: its shared-memory object ",
        QuoteClientText(region_->key),
        " shrank under the server's mapping, so what the job read or wrote "
        "there is lost; unregister the region"));
  }

 private:
  RegionRegistry* const registry_;
  const std::shared_ptr<Region> region_;
};

RegionRegistry::RegionRegistry(const Options& options, Executor* executor)
    : options_([&] {
        Options o = options;
        if (o.host_id.empty()) o.host_id = ReadHostId();
        if (o.max_system_bytes == 0) {
          o.max_system_bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                               static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 2;
        }
        return o;
      }()),
      executor_(executor) {}

RegionRegistry::~RegionRegistry() {
  absl::MutexLock lock(&mu_);
  for (auto& [owner, named] : regions_) {
    for (auto& [name, region] : named) region->Unmap();
  }
  regions_.clear();
}

absl::StatusOr<v1::RegionInfo> RegionRegistry::Register(
    const std::string& owner, const v1::RegisterRegionRequest& req) {
  RETURN_IF_ERROR(CheckRegionName("name", req.name()));
  if (!req.host_id().empty() && !options_.host_id.empty() &&
      req.host_id() != options_.host_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "host_id: the caller runs on another host (boot id ",
        QuoteClientText(req.host_id()), ", the server's ",
        QuoteClientText(options_.host_id),
        "): regions share memory on the server's host only; send the "
        "operands in the requests instead"));
  }
  const uint64_t system_bytes = req.has_system() ? req.system().byte_size() : 0;
  auto check_room = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    if (count_ >= options_.max_regions) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the server has ", count_,
                       " regions registered, its limit; "
                       "retry once some are unregistered"));
    }
    if (system_bytes > options_.max_system_bytes - system_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "system.byte_size: ", system_bytes,
          " more bytes of shared memory "
          "would pass the server's limit of ",
          options_.max_system_bytes, " (", system_bytes_, " registered)"));
    }
    const auto it = regions_.find(owner);
    if (it == regions_.end()) return absl::OkStatus();
    if (it->second.count(req.name()) > 0) {
      return absl::AlreadyExistsError(absl::StrCat(
          "name: this caller has a region ", QuoteClientText(req.name()),
          " already; unregister it first or pick another name"));
    }
    if (it->second.size() >= options_.max_regions_per_owner) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "this caller has ", it->second.size(),
          " regions, the server's limit (--max-regions-per-client ",
          options_.max_regions_per_owner, "); unregister some first"));
    }
    return absl::OkStatus();
  };
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(check_room());
  }

  auto region = std::make_shared<Region>();
  region->executor = executor_;
  region->owner = owner;
  region->name = req.name();
  if (req.has_system()) {
    region->key = req.system().key();
    region->size = req.system().byte_size();
    ASSIGN_OR_RETURN(region->shm, SharedMemoryMapping::Map(
                                      req.system(), options_.key_prefix));
    ASSIGN_OR_RETURN(
        region->pinned,
        executor_->PinHostRegion(region->shm->base(), region->shm->length(),
                                 region->shm->read_only()));
  } else if (req.has_cuda_ipc()) {
    const v1::CudaIpcMemory& ipc = req.cuda_ipc();
    if (ipc.handle().size() != kIpcHandleBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda_ipc.handle: ", ipc.handle().size(),
                       " bytes; a cudaIpcMemHandle_t has ", kIpcHandleBytes));
    }
    if (ipc.byte_size() == 0) {
      return absl::InvalidArgumentError(
          "cuda_ipc.byte_size: must be at least 1");
    }
    region->cuda_ipc = true;
    region->size = ipc.byte_size();
    ASSIGN_OR_RETURN(region->ipc,
                     executor_->OpenIpcRegion(ipc.handle(), ipc.device_uuid(),
                                              ipc.byte_size()));
  } else {
    return absl::InvalidArgumentError(
        "memory: missing; give system (a POSIX shared-memory object) or "
        "cuda_ipc (a CUDA IPC handle)");
  }

  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  // Another registration of the name may have won meanwhile; the region
  // mapped here then goes (its destructor unmaps it).
  RETURN_IF_ERROR(check_room());
  region->last_used = now;
  regions_[owner][req.name()] = region;
  ++count_;
  if (region->cuda_ipc) {
    ++ipc_count_;
    ipc_bytes_ += region->size;
  } else {
    system_bytes_ += region->size;
  }
  spdlog::info("{} registered region '{}': {} bytes of {}{}", owner,
               region->name, region->size,
               region->cuda_ipc
                   ? absl::StrCat("CUDA IPC memory on ", region->ipc.device_id)
                   : region->key,
               region->pinned ? ", pinned" : "");
  return Describe(*region, now);
}

absl::Status RegionRegistry::Unregister(const std::string& owner,
                                        const std::string& name,
                                        std::function<void()> done) {
  std::shared_ptr<Region> idle;
  {
    absl::MutexLock lock(&mu_);
    auto owned = regions_.find(owner);
    auto it = owned == regions_.end() ? decltype(owned->second.end())()
                                      : owned->second.find(name);
    if (owned == regions_.end() || it == owned->second.end()) {
      return absl::NotFoundError(absl::StrCat(
          "name: this caller has no region ", QuoteClientText(name)));
    }
    std::shared_ptr<Region> region = std::move(it->second);
    Forget(*region);
    owned->second.erase(it);
    if (owned->second.empty()) regions_.erase(owned);
    region->retired = true;
    if (region->holds > 0) {
      region->on_unmapped.push_back(std::move(done));
      return absl::OkStatus();
    }
    idle = std::move(region);
  }
  idle->Unmap();
  done();
  return absl::OkStatus();
}

std::vector<v1::RegionInfo> RegionRegistry::List(const std::string& owner) {
  std::vector<v1::RegionInfo> out;
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  auto owned = regions_.find(owner);
  if (owned == regions_.end()) return out;
  for (auto& [name, region] : owned->second) {
    out.push_back(Describe(*region, now));
    region->last_used = now;
  }
  return out;
}

absl::StatusOr<RegionSpan> RegionRegistry::Hold(const std::string& owner,
                                                const RegionRef& ref,
                                                uint64_t bytes,
                                                absl::string_view operand,
                                                bool write) {
  std::shared_ptr<Region> region;
  {
    absl::MutexLock lock(&mu_);
    auto owned = regions_.find(owner);
    if (owned != regions_.end()) {
      auto it = owned->second.find(ref.region);
      if (it != owned->second.end()) region = it->second;
    }
    if (region == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "params.", operand, "_region: this caller has no region ",
          QuoteClientText(ref.region),
          " (register it first; a region idle for the server's "
          "region_idle_timeout_s is unregistered)"));
    }
    if (ref.offset > region->size || bytes > region->size - ref.offset) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "params.%s_region: %s's %d bytes from offset %d pass the end of "
          "region %s (%d bytes)",
          std::string(operand), std::string(operand), bytes, ref.offset,
          QuoteClientText(ref.region), region->size));
    }
    if (write && region->read_only()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "params.", operand, "_region: region ", QuoteClientText(ref.region),
          " is read-only to the server (its object's mode does not let the "
          "server's user write it), so it cannot take a result"));
    }
    if (region->faulted()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "params.", operand, "_region: region ", QuoteClientText(ref.region),
          " broke (its shared-memory object shrank under the server's "
          "mapping); unregister it"));
    }
    ++region->holds;
    region->last_used = absl::Now();
  }
  RegionSpan span;
  if (region->cuda_ipc) {
    span.device = reinterpret_cast<float*>(
        static_cast<char*>(region->ipc.pointer) + ref.offset);
    span.ordinal = region->ipc.ordinal;
  } else {
    span.host = reinterpret_cast<float*>(region->shm->data() + ref.offset);
  }
  span.hold = std::make_shared<HoldImpl>(this, std::move(region));
  return span;
}

void RegionRegistry::Release(Region* region) {
  std::vector<std::function<void()>> unmapped;
  {
    absl::MutexLock lock(&mu_);
    --region->holds;
    region->last_used = absl::Now();
    if (!region->retired || region->holds > 0) return;
    unmapped.swap(region->on_unmapped);
  }
  region->Unmap();
  for (auto& done : unmapped) done();
}

int RegionRegistry::ExpireIdle(absl::Time now) {
  if (options_.idle_timeout <= absl::ZeroDuration()) return 0;
  std::vector<std::shared_ptr<Region>> expired;
  {
    absl::MutexLock lock(&mu_);
    for (auto owned = regions_.begin(); owned != regions_.end();) {
      auto& named = owned->second;
      for (auto it = named.begin(); it != named.end();) {
        Region& r = *it->second;
        if (r.holds == 0 && now - r.last_used >= options_.idle_timeout) {
          r.retired = true;
          Forget(r);
          expired.push_back(std::move(it->second));
          it = named.erase(it);
        } else {
          ++it;
        }
      }
      owned = named.empty() ? regions_.erase(owned) : std::next(owned);
    }
  }
  for (const auto& region : expired) {
    spdlog::info(
        "region '{}' of {} unregistered: idle for {} (--region-idle-timeout)",
        region->name, region->owner,
        absl::FormatDuration(now - region->last_used));
    region->Unmap();
  }
  return static_cast<int>(expired.size());
}

size_t RegionRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return count_;
}

void RegionRegistry::Forget(const Region& region) {
  --count_;
  if (region.cuda_ipc) {
    --ipc_count_;
    ipc_bytes_ -= region.size;
  } else {
    system_bytes_ -= region.size;
  }
}

RegionRegistry::Totals RegionRegistry::totals() const {
  absl::MutexLock lock(&mu_);
  return Totals{count_ - ipc_count_, ipc_count_, system_bytes_, ipc_bytes_};
}

v1::RegionInfo RegionRegistry::Describe(const Region& region, absl::Time now) {
  v1::RegionInfo info;
  info.set_name(region.name);
  info.set_kind(region.cuda_ipc ? "cuda-ipc" : "system");
  info.set_byte_size(region.size);
  info.set_key(region.key);
  info.set_device(region.ipc.device_id);
  info.set_read_only(region.read_only());
  info.set_pinned(region.pinned);
  info.set_jobs(region.holds);
  info.set_idle_s(
      region.holds > 0 ? 0.0 : absl::ToDoubleSeconds(now - region.last_used));
  return info;
}

}  // namespace gemm::server
