#include "client/lib/shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/host_id.h"

namespace gemm::client {

absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> SharedMemoryRegion::Create(
    const std::string& key, uint64_t bytes) {
  if (bytes == 0) {
    return absl::InvalidArgumentError("a region needs at least 1 byte");
  }
  const int fd = shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    const int error = errno;
    const std::string what =
        absl::StrCat("shm_open(\"", key, "\"): ", std::strerror(error));
    return error == EEXIST ? absl::AlreadyExistsError(what)
                           : absl::InvalidArgumentError(what);
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    close(fd);
    shm_unlink(key.c_str());
    return absl::ResourceExhaustedError(absl::StrCat(
        "sizing \"", key, "\" to ", bytes, " bytes: ", std::strerror(error),
        " (is /dev/shm big enough?)"));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(key.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("mapping \"", key, "\": ", std::strerror(error)));
  }
  return std::unique_ptr<SharedMemoryRegion>(
      new SharedMemoryRegion(key, base, bytes));
}

std::string SharedMemoryRegion::UniqueKey(const std::string& tag) {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat("/gemm-", getpid(), "-", tag, "-", counter.fetch_add(1));
}

SharedMemoryRegion::~SharedMemoryRegion() {
  munmap(base_, size_);
  shm_unlink(key_.c_str());
}

absl::Status SharedMemoryRegion::Chmod(mode_t mode) {
  const int fd = shm_open(key_.c_str(), O_RDWR, 0);
  if (fd < 0 || fchmod(fd, mode) != 0) {
    const int error = errno;
    if (fd >= 0) close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("chmod of \"", key_, "\": ", std::strerror(error)));
  }
  close(fd);
  return absl::OkStatus();
}

v1::RegisterRegionRequest SharedMemoryRegion::Describe(
    const std::string& name) const {
  v1::RegisterRegionRequest request;
  request.set_name(name);
  request.set_host_id(ReadHostId());
  v1::SystemSharedMemory* system = request.mutable_system();
  system->set_key(key_);
  system->set_offset(0);
  system->set_byte_size(size_);
  return request;
}

}  // namespace gemm::client
