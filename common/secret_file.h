// ReadSecretFile: the whole of a small file that configures security (a
// PEM certificate or key, a token list), as a status that names the flag
// and the file when it cannot be read or is empty. Both programs read their
// TLS material and tokens this way, from files rather than flags, so that
// secrets stay out of process listings.
//
// Thread-safety: a stateless function.
//
//   ASSIGN_OR_RETURN(std::string key, ReadSecretFile(path, "--tls-key"));
#ifndef GEMM_COMMON_SECRET_FILE_H_
#define GEMM_COMMON_SECRET_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gemm {

// INVALID_ARGUMENT "FLAG PATH: ..." when the file cannot be read, is empty
// or is larger than 1 MiB.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path,
                                           absl::string_view flag);

}  // namespace gemm

#endif  // GEMM_COMMON_SECRET_FILE_H_
