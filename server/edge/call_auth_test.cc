#include "server/edge/call_auth.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace gemm::server {
namespace {

TEST(CallAuthenticatorTest, TokensNameTheCallerAndOthersAreRefused) {
  auto auth = CallAuthenticator::FromTokens(
      "# operators\nalice 0123456789abcdef0123\n\n"
      "fedcba9876543210fedc  # no name\n");
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_TRUE((*auth)->tokens_required());
  EXPECT_EQ(*(*auth)->Identify("Bearer 0123456789abcdef0123", "", "ipv4:1:2"),
            "token:alice");
  EXPECT_EQ(*(*auth)->Identify("Bearer fedcba9876543210fedc", "cn", "x"),
            "token:token-4");
  for (absl::string_view bad :
       {"", "Bearer 0123456789abcdef012", "Bearer 0123456789abcdef01234",
        "bearer 0123456789abcdef0123", "0123456789abcdef0123"}) {
    auto who = (*auth)->Identify(bad, "", "ipv4:10.0.0.1:5");
    EXPECT_TRUE(absl::IsUnauthenticated(who.status())) << bad;
  }
  EXPECT_NE(
      (*auth)->Identify("", "", "p").status().message().find("--token-file"),
      std::string::npos);
}

TEST(CallAuthenticatorTest, WithoutTokensTheCertificateOrTheAddress) {
  auto auth = CallAuthenticator::FromTokens("");
  ASSERT_TRUE(auth.ok());
  EXPECT_FALSE((*auth)->tokens_required());
  EXPECT_EQ(*(*auth)->Identify("", "client-7", "ipv4:10.0.0.1:5"),
            "cert:client-7");
  EXPECT_EQ(*(*auth)->Identify("Bearer whatever", "", "ipv4:10.0.0.1:5"),
            "10.0.0.1");
}

TEST(CallAuthenticatorTest, BadTokenFilesAreRefused) {
  EXPECT_FALSE(CallAuthenticator::FromTokens("a b c\n").ok());
  EXPECT_FALSE(CallAuthenticator::FromTokens("short\n").ok());
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string missing =
      std::string(tmp != nullptr ? tmp : ".") + "/no-such-token-file";
  const auto absent = CallAuthenticator::Create(missing);
  EXPECT_FALSE(absent.ok());
  EXPECT_NE(absent.status().message().find("--token-file"), std::string::npos);
}

}  // namespace
}  // namespace gemm::server
