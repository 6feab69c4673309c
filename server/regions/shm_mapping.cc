#include "server/regions/shm_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/admission/validation.h"

namespace gemm::server {
namespace {

std::string ErrnoText(int error) { return std::strerror(error); }

// A shm_open name: one leading '/', no other, at most NAME_MAX.
absl::Status CheckShmKey(const std::string& key) {
  if (key.size() < 2 || key[0] != '/' ||
      key.find('/', 1) != std::string::npos || key.size() > 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        "system.key: ", QuoteClientText(key),
        " is not a POSIX shared-memory name (one leading '/', no other, "
        "e.g. \"/gemm-1234\")"));
  }
  return absl::OkStatus();
}

absl::Status CheckRequest(const v1::SystemSharedMemory& system,
                          absl::string_view key_prefix) {
  if (absl::Status key = CheckShmKey(system.key()); !key.ok()) return key;
  if (!absl::StartsWith(system.key(), key_prefix)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "system.key: ", QuoteClientText(system.key()), " does not start with ",
        QuoteClientText(key_prefix),
        ": the server opens only shared-memory objects named for it "
        "(gemm-server --region-key-prefix)"));
  }
  if (system.byte_size() == 0) {
    return absl::InvalidArgumentError("system.byte_size: must be at least 1");
  }
  if (system.offset() % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("system.offset: ", system.offset(),
                     " is not a multiple of 4 (operands are float32)"));
  }
  return absl::OkStatus();
}

// The object, opened non-blocking (a FIFO planted under the name must not
// block the call): read-write unless asked for read-only or refused.
absl::StatusOr<int> Open(const v1::SystemSharedMemory& system,
                         bool* read_only) {
  const char* key = system.key().c_str();
  *read_only = system.read_only();
  int fd = shm_open(key, (*read_only ? O_RDONLY : O_RDWR) | O_NONBLOCK, 0);
  if (fd < 0 && errno == EACCES && !*read_only) {
    fd = shm_open(key, O_RDONLY | O_NONBLOCK, 0);
    *read_only = true;
  }
  if (fd >= 0) return fd;
  const int error = errno;
  const std::string what =
      absl::StrCat("system.key: the server cannot open ",
                   QuoteClientText(system.key()), ": ", ErrnoText(error));
  if (error == ENOENT) {
    return absl::NotFoundError(absl::StrCat(
        what,
        " (no such object on the server's host: a caller on another host, "
        "or in a container that does not share /dev/shm with the server's, "
        "cannot share memory with it)"));
  }
  if (error == EACCES) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, " (its mode must let the server's user read it)"));
  }
  return absl::InvalidArgumentError(what);
}

// OK when `fd` is a regular object holding offset + byte_size bytes.
absl::Status CheckObject(int fd, const v1::SystemSharedMemory& system) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("system.key: ", QuoteClientText(system.key()),
                     " is not a shared-memory object (a regular file under "
                     "/dev/shm)"));
  }
  const uint64_t object_bytes = static_cast<uint64_t>(st.st_size);
  if (system.offset() > object_bytes ||
      system.byte_size() > object_bytes - system.offset()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "system: %d bytes from offset %d pass the end of %s, which has %d "
        "bytes",
        system.byte_size(), system.offset(), QuoteClientText(system.key()),
        object_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedMemoryMapping>> SharedMemoryMapping::Map(
    const v1::SystemSharedMemory& system, absl::string_view key_prefix) {
  if (absl::Status s = CheckRequest(system, key_prefix); !s.ok()) return s;
  std::unique_ptr<SharedMemoryMapping> shm(new SharedMemoryMapping());
  absl::StatusOr<int> fd = Open(system, &shm->read_only_);
  if (!fd.ok()) return fd.status();
  if (absl::Status s = CheckObject(*fd, system); !s.ok()) {
    close(*fd);
    return s;
  }
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t map_offset = system.offset() / page * page;
  const size_t length = system.offset() - map_offset + system.byte_size();
  void* base =
      mmap(nullptr, length, PROT_READ | (shm->read_only_ ? 0 : PROT_WRITE),
           MAP_SHARED, *fd, static_cast<off_t>(map_offset));
  const int map_error = errno;
  close(*fd);
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "system: the server cannot map ", length, " bytes of ",
        QuoteClientText(system.key()), ": ", ErrnoText(map_error)));
  }
  shm->base_ = base;
  shm->length_ = length;
  shm->data_ = static_cast<char*>(base) + (system.offset() - map_offset);
  shm->guard_ = std::make_unique<MappingGuard>(base, length);
  if (!shm->guard_->guarded()) {
    return absl::ResourceExhaustedError(
        "system: the server maps as many regions as it can guard; "
        "unregister some first");
  }
  return shm;
}

SharedMemoryMapping::~SharedMemoryMapping() {
  guard_.reset();
  if (base_ != nullptr) munmap(base_, length_);
}

}  // namespace gemm::server
