#include "common/host_id.h"

#include <fstream>

#include "absl/strings/ascii.h"

namespace gemm {

std::string ReadHostId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return std::string(absl::StripAsciiWhitespace(id));
}

}  // namespace gemm
