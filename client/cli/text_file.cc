#include "client/cli/text_file.h"

#include <fstream>

#include "absl/strings/str_cat.h"

namespace gemm::client {

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace gemm::client
