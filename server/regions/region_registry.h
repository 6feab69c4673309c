// RegionRegistry: the shared-memory regions callers on the server's host
// have registered, and the holds jobs take on them.
//
// A system region is a POSIX shared-memory object that the registry maps
// (read-write, or read-only when the server may not write it), guards
// against the object shrinking (mapping_guard.h) and hands to the backend
// to pin (Executor::PinHostRegion: cudaHostRegister on CUDA, so copies run
// straight from the caller's pages). A CUDA IPC region is a caller's GPU
// allocation that the backend opens (Executor::OpenIpcRegion). Regions are
// kept per owner (the caller's identity, call_auth.h); a name is unique per
// owner.
//
// Lifetime. A job takes a hold (Hold) on each region it uses, from its
// admission to its end. Unregister forgets the name at once, so no new job
// can use it, and reports back once the last hold is gone and the region
// is unmapped. Regions idle (no hold, no call of their owner naming or
// listing them) for Options::idle_timeout are unregistered by
// ExpireIdle(): a caller that dies without unregistering leaves nothing
// mapped for long. Everything left is unmapped when the registry is
// destroyed (after the server has stopped, so no job holds a region).
//
// Thread-safety: thread-safe.
//
//   RegionRegistry regions(options, &executor);
//   ASSIGN_OR_RETURN(v1::RegionInfo info, regions.Register(owner, request));
//   ASSIGN_OR_RETURN(RegionSpan a, regions.Hold(owner, spec.a_region,
//                                               bytes, "a", /*write=*/false));
//   regions.Unregister(owner, "weights", [](absl::Status s) { ... });
#ifndef GEMM_SERVER_REGIONS_REGION_REGISTRY_H_
#define GEMM_SERVER_REGIONS_REGION_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/gemm.pb.h"
#include "server/core/executor.h"
#include "server/core/gemm_job.h"

namespace gemm::server {

class RegionRegistry {
 public:
  // Who may register regions (gemm-server --regions).
  enum class Registrants {
    kNone,   // nobody: the server serves no regions
    kLocal,  // callers at a loopback address or on a Unix socket
    kAny,    // any address (containers on one host, over a bridge)
  };

  struct Options {
    // Default kLocal: a region shares memory on this host only.
    Registrants registrants = Registrants::kLocal;
    // Regions one owner may have at once. Default 64.
    uint32_t max_regions_per_owner = 64;
    // Regions of all owners together. Default 1024.
    uint32_t max_regions = 1024;
    // Bytes of all system regions together (the server maps them, and pins
    // them on CUDA). Default 0: half the host's physical memory.
    uint64_t max_system_bytes = 0;
    // The server opens only shared-memory objects whose names start with
    // this, so a caller cannot point it at other programs' objects. Default
    // "/gemm-" (what client/lib/shm_region.h names its objects).
    std::string key_prefix = "/gemm-";
    // Regions idle this long are unregistered; zero: never. Default 10 min.
    absl::Duration idle_timeout = absl::Minutes(10);
    // This host's id (common/host_id.h), compared with a registration's
    // host_id. Default: read at construction.
    std::string host_id;
  };

  // `executor` pins and opens regions; it must outlive the registry.
  RegionRegistry(const Options& options, Executor* executor);
  ~RegionRegistry();  // unmaps every region; no hold may be left

  RegionRegistry(const RegionRegistry&) = delete;
  RegionRegistry& operator=(const RegionRegistry&) = delete;

  // Registers `request` for `owner`: INVALID_ARGUMENT for a bad name, size
  // or handle, ALREADY_EXISTS for a name in use, RESOURCE_EXHAUSTED past
  // the owner's limit, NOT_FOUND / PERMISSION_DENIED for an object the
  // server cannot open, FAILED_PRECONDITION for a caller on another host,
  // UNIMPLEMENTED for CUDA IPC on a backend without CUDA.
  absl::StatusOr<v1::RegionInfo> Register(const std::string& owner,
                                          const v1::RegisterRegionRequest& req);

  // Forgets `owner`'s region `name` (NOT_FOUND, returned, when there is
  // none). `done` runs once, with OK, when no job holds it any more and it
  // is unmapped: at once, or on the thread whose job ends last.
  absl::Status Unregister(const std::string& owner, const std::string& name,
                          std::function<void()> done);

  // `owner`'s regions, by name; listing counts as using them.
  std::vector<v1::RegionInfo> List(const std::string& owner);

  // A hold on `bytes` bytes at `ref` in one of `owner`'s regions, for a
  // job's operand `operand` ("a", "b", "c" or "result"; `write` for the
  // result): INVALID_ARGUMENT naming the operand for an unknown region,
  // bytes past its end or a result in a read-only region,
  // FAILED_PRECONDITION for a region that broke.
  absl::StatusOr<RegionSpan> Hold(const std::string& owner,
                                  const RegionRef& ref, uint64_t bytes,
                                  absl::string_view operand, bool write);

  // Unregisters regions idle past the timeout; returns how many.
  int ExpireIdle(absl::Time now);

  // Regions registered now, of every owner.
  size_t size() const;
  // Regions registered now and their bytes, by kind (the metrics).
  struct Totals {
    size_t system = 0;
    size_t cuda_ipc = 0;
    uint64_t system_bytes = 0;
    uint64_t cuda_ipc_bytes = 0;
  };
  Totals totals() const;
  const Options& options() const { return options_; }

 private:
  struct Region;
  class HoldImpl;
  friend class HoldImpl;

  void Release(Region* region);
  static v1::RegionInfo Describe(const Region& region, absl::Time now);

  // Removes a region from the maps' totals; call with mu_ held.
  void Forget(const Region& region) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  Executor* const executor_;
  mutable absl::Mutex mu_;
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t system_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t ipc_count_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t ipc_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // By owner, then name.
  std::map<std::string, std::map<std::string, std::shared_ptr<Region>>> regions_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_REGIONS_REGION_REGISTRY_H_
