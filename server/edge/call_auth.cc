#include "server/edge/call_auth.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/secret_file.h"
#include "server/edge/client_identity.h"

namespace gemm::server {
namespace {

// Equal in time independent of where `a` and `b` differ (their lengths
// aside), so that a wrong token's timing tells nothing of the right one.
bool ConstantTimeEqual(absl::string_view a, absl::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0;
    const unsigned char y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CallAuthenticator>> CallAuthenticator::Create(
    const std::string& token_file) {
  if (token_file.empty()) return FromTokens("");
  absl::StatusOr<std::string> text = ReadSecretFile(token_file, "--token-file");
  if (!text.ok()) return text.status();
  absl::StatusOr<std::unique_ptr<CallAuthenticator>> auth = FromTokens(*text);
  if (auth.ok() && !(*auth)->tokens_required()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--token-file ", token_file, ": holds no token"));
  }
  return auth;
}

absl::StatusOr<std::unique_ptr<CallAuthenticator>>
CallAuthenticator::FromTokens(absl::string_view text) {
  auto auth = std::unique_ptr<CallAuthenticator>(new CallAuthenticator());
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() > 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file line ", line_number,
                       ": expected \"NAME TOKEN\" or "
                       "\"TOKEN\", found ",
                       fields.size(), " fields"));
    }
    Token token;
    token.name = fields.size() == 2 ? std::string(fields[0])
                                    : absl::StrCat("token-", line_number);
    token.secret = std::string(fields.back());
    if (token.secret.size() < 16) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file line ", line_number,
                       ": a token must have at least 16 characters"));
    }
    auth->tokens_.push_back(std::move(token));
  }
  return auth;
}

absl::StatusOr<std::string> CallAuthenticator::Identify(
    const grpc::ServerContextBase& context) const {
  absl::string_view authorization;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  std::string common_name;
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    for (const grpc::string_ref& cn :
         auth->FindPropertyValues("x509_common_name")) {
      common_name.assign(cn.data(), cn.size());
    }
  }
  return Identify(authorization, common_name, context.peer());
}

absl::StatusOr<std::string> CallAuthenticator::Identify(
    absl::string_view authorization, absl::string_view common_name,
    absl::string_view peer) const {
  if (!tokens_.empty()) {
    absl::string_view presented = authorization;
    if (!absl::ConsumePrefix(&presented, "Bearer ")) {
      return absl::UnauthenticatedError(
          authorization.empty()
              ? "this server needs a token: \"authorization: Bearer TOKEN\" "
                "metadata (gemm-client --token-file)"
              : "the authorization metadata is not \"Bearer TOKEN\"");
    }
    // Every token is compared, whichever matches.
    const Token* match = nullptr;
    for (const Token& token : tokens_) {
      if (ConstantTimeEqual(presented, token.secret)) match = &token;
    }
    if (match == nullptr) {
      return absl::UnauthenticatedError(
          "the token is not one of this "
          "server's");
    }
    return absl::StrCat("token:", match->name);
  }
  if (!common_name.empty()) return absl::StrCat("cert:", common_name);
  return ClientIdentityOfPeer(peer);
}

}  // namespace gemm::server
