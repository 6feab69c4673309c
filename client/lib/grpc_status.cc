#include "client/lib/grpc_status.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gemm::client {

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  // gRPC's own words name OpenSSL's error; say which flags it is about.
  if (absl::StrContains(status.error_message(), "andshake failed")) {
    return absl::Status(
        code, absl::StrCat(status.error_message(),
                           " (TLS handshake failed: --tls-ca must hold the "
                           "CA that signed the server's certificate, and a "
                           "server that asks for a client certificate needs "
                           "--tls-cert and --tls-key from its CA)"));
  }
  return absl::Status(code, status.error_message());
}

}  // namespace gemm::client
