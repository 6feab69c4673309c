// Reads and writes 2-D float32 matrices in NumPy's .npy format (version 1
// and 2 headers, C order). float64 files are read and narrowed to float32.
//
// Thread-safety: stateless functions.
//
//   ASSIGN_OR_RETURN(NpyMatrix a, ReadNpy("a.npy"));
//   RETURN_IF_ERROR(WriteNpy("c.npy", m, n, c.data()));
#ifndef GEMM_CLIENT_CLI_NPY_H_
#define GEMM_CLIENT_CLI_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gemm::client {

struct NpyMatrix {
  uint64_t rows = 0;
  uint64_t cols = 0;
  std::vector<float> data;  // row-major
};

absl::StatusOr<NpyMatrix> ReadNpy(const std::string& path);
absl::Status WriteNpy(const std::string& path, uint64_t rows, uint64_t cols,
                      const float* data);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_NPY_H_
