#include "client/cli/npy.h"

#include <cstring>
#include <fstream>
#include <regex>

#include "absl/strings/str_cat.h"

namespace gemm::client {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

}  // namespace

absl::StatusOr<NpyMatrix> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  char preamble[8];
  if (!in.read(preamble, 8) || std::memcmp(preamble, kMagic, 6) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a .npy file"));
  }
  uint32_t header_len = 0;
  if (preamble[6] == 1) {
    uint8_t len[2];
    in.read(reinterpret_cast<char*>(len), 2);
    header_len = len[0] | (len[1] << 8);
  } else {
    uint8_t len[4];
    in.read(reinterpret_cast<char*>(len), 4);
    header_len =
        len[0] | (len[1] << 8) | (len[2] << 16) | (uint32_t{len[3]} << 24);
  }
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": truncated header"));
  }
  std::smatch match;
  if (!std::regex_search(header, match,
                         std::regex("'descr':\\s*'([<|=]?)([fi])(\\d)'"))) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": unsupported dtype in header ", header));
  }
  const std::string kind = match[2].str() + match[3].str();
  if (kind != "f4" && kind != "f8") {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": dtype must be float32 or float64, got ", kind));
  }
  if (header.find("'fortran_order': True") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": Fortran order is not supported; save with "
                     "np.ascontiguousarray"));
  }
  if (!std::regex_search(
          header, match,
          std::regex("'shape':\\s*\\((\\d+),\\s*(\\d+),?\\s*\\)"))) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": must hold a 2-D matrix; header ", header));
  }
  NpyMatrix matrix;
  matrix.rows = std::stoull(match[1].str());
  matrix.cols = std::stoull(match[2].str());
  const uint64_t count = matrix.rows * matrix.cols;
  matrix.data.resize(count);
  if (kind == "f4") {
    in.read(reinterpret_cast<char*>(matrix.data.data()), 4 * count);
  } else {
    std::vector<double> wide(count);
    in.read(reinterpret_cast<char*>(wide.data()), 8 * count);
    for (uint64_t i = 0; i < count; ++i)
      matrix.data[i] = static_cast<float>(wide[i]);
  }
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": truncated data"));
  }
  return matrix;
}

absl::Status WriteNpy(const std::string& path, uint64_t rows, uint64_t cols,
                      const float* data) {
  std::string header = absl::StrCat(
      "{'descr': '<f4', 'fortran_order': False, "
      "'shape': (",
      rows, ", ", cols, "), }");
  // Pad so that the data starts at a multiple of 64 bytes.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::NotFoundError(absl::StrCat(path, ": cannot create"));
  out.write(kMagic, 6);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char len_bytes[2] = {static_cast<char>(len & 0xff),
                             static_cast<char>(len >> 8)};
  out.write(len_bytes, 2);
  out.write(header.data(), header.size());
  out.write(reinterpret_cast<const char*>(data), 4 * rows * cols);
  if (!out) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace gemm::client
