#include "client/cli/npy.h"

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace gemm::client {
namespace {

std::string TempPath(const char* name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(NpyTest, RoundTripsAMatrix) {
  const std::vector<float> data = {1.5f, -2, 3, 4.25f, 5, -6};
  const std::string path = TempPath("m.npy");
  ASSERT_TRUE(WriteNpy(path, 2, 3, data.data()).ok());
  auto read = ReadNpy(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->rows, 2u);
  EXPECT_EQ(read->cols, 3u);
  EXPECT_EQ(read->data, data);
  // The data starts 64-byte aligned, as NumPy writes it.
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  EXPECT_EQ(static_cast<size_t>(in.tellg()) % 64, (6 * 4) % 64);
}

TEST(NpyTest, ReadsFloat64AndNarrows) {
  const std::string path = TempPath("f8.npy");
  std::string header =
      "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {static_cast<char>(header.size()), 0};
  out.write(len, 2);
  out << header;
  const double values[2] = {0.25, -8};
  out.write(reinterpret_cast<const char*>(values), sizeof(values));
  out.close();
  auto read = ReadNpy(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->data, (std::vector<float>{0.25f, -8.0f}));
}

TEST(NpyTest, RejectsWhatItCannotRead) {
  EXPECT_EQ(ReadNpy(TempPath("missing.npy")).status().code(),
            absl::StatusCode::kNotFound);
  const std::string path = TempPath("junk.npy");
  std::ofstream(path) << "not numpy";
  EXPECT_EQ(ReadNpy(path).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gemm::client
