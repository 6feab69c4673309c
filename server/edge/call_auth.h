// CallAuthenticator: whether a call may run, and who it comes from for the
// per-client limits (client_shares.h).
//
// With a token file, every call of gemm.v1.GemmService must carry
// "authorization: Bearer TOKEN" with one of its tokens (UNAUTHENTICATED
// otherwise; the comparison takes the same time whatever the token), and
// the caller is the token's name. Without one, a caller with a client
// certificate (mTLS) is its certificate's common name, and any other the
// address it connects from. The health service and reflection do not ask
// (load balancers and tools reach them without a token).
//
// Token file: one token per line, "NAME TOKEN" or a lone "TOKEN" (named
// "token-N" by its line); blank lines and lines from '#' are skipped.
//
// Thread-safety: thread-safe once made.
//
//   ASSIGN_OR_RETURN(auto auth, CallAuthenticator::Create(token_file));
//   ASSIGN_OR_RETURN(std::string who, auth->Identify(*context));
#ifndef GEMM_SERVER_EDGE_CALL_AUTH_H_
#define GEMM_SERVER_EDGE_CALL_AUTH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"

namespace gemm::server {

class CallAuthenticator {
 public:
  // `token_file` empty: no tokens asked for.
  static absl::StatusOr<std::unique_ptr<CallAuthenticator>> Create(
      const std::string& token_file);
  // From the token file's text (for tests).
  static absl::StatusOr<std::unique_ptr<CallAuthenticator>> FromTokens(
      absl::string_view text);

  // The caller's identity ("token:NAME", "cert:CN" or its address), or
  // UNAUTHENTICATED naming what is missing.
  absl::StatusOr<std::string> Identify(
      const grpc::ServerContextBase& context) const;
  // The identity of a call whose "authorization" header is
  // `authorization` (empty: none), common name `common_name` and gRPC peer
  // `peer`.
  absl::StatusOr<std::string> Identify(absl::string_view authorization,
                                       absl::string_view common_name,
                                       absl::string_view peer) const;

  bool tokens_required() const { return !tokens_.empty(); }

 private:
  struct Token {
    std::string name;
    std::string secret;
  };
  std::vector<Token> tokens_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_EDGE_CALL_AUTH_H_
