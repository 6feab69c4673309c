#include "common/secret_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gemm {

absl::StatusOr<std::string> ReadSecretFile(const std::string& path,
                                           absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path, ": cannot read it (", std::strerror(errno), ")"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string contents = text.str();
  if (contents.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": the file is empty"));
  }
  if (contents.size() > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": larger than 1 MiB"));
  }
  return contents;
}

}  // namespace gemm
