// SharedMemoryRegion: a POSIX shared-memory object the caller creates and
// maps, for a server on the same host to use as a region (gemm.proto's
// Region; GemmClient::RegisterRegion). Operands are written into it, jobs
// name offsets in it (GemmArgs.a_region ...), results land in it.
//
// The object is created with mode 0600 (the server must run as the same
// user, or the caller must widen the mode with Chmod), and unlinked when the
// SharedMemoryRegion is destroyed: a server that still maps it keeps the
// memory until it unmaps it (unregistering, or the server's idle timeout).
//
// Thread-safety: the object is not; its memory is the caller's to share.
//
//   ASSIGN_OR_RETURN(auto shm, SharedMemoryRegion::Create("/gemm-1", bytes));
//   std::copy(a.begin(), a.end(), shm->floats());
//   RETURN_IF_ERROR(client->RegisterRegion("work", shm->Describe()));
#ifndef GEMM_CLIENT_LIB_SHM_REGION_H_
#define GEMM_CLIENT_LIB_SHM_REGION_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/gemm.pb.h"

namespace gemm::client {

class SharedMemoryRegion {
 public:
  // Creates `key` ("/name": one leading slash) of `bytes` bytes and maps it
  // read-write; ALREADY_EXISTS when the name is taken.
  static absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> Create(
      const std::string& key, uint64_t bytes);
  // A key unique to this process and `tag`: "/gemm-<pid>-<tag>-<counter>".
  static std::string UniqueKey(const std::string& tag);

  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;
  ~SharedMemoryRegion();  // unmaps and unlinks

  const std::string& key() const { return key_; }
  uint64_t size() const { return size_; }
  char* data() const { return static_cast<char*>(base_); }
  float* floats() const { return static_cast<float*>(base_); }
  // Widens the object's mode (e.g. 0660 for a server in the caller's
  // group).
  absl::Status Chmod(mode_t mode);

  // The region as RegisterRegionRequest takes it (all of the object), with
  // this host's id.
  v1::RegisterRegionRequest Describe(const std::string& name) const;

 private:
  SharedMemoryRegion(std::string key, void* base, uint64_t size)
      : key_(std::move(key)), base_(base), size_(size) {}

  std::string key_;
  void* base_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace gemm::client

#endif  // GEMM_CLIENT_LIB_SHM_REGION_H_
