// Issue 13: TLS, mTLS and bearer tokens, end to end: certificates made at
// test time with openssl, a real gemm-server and the client library.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "client/lib/gemm_client.h"
#include "client/lib/shm_region.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/gemm.grpc.pb.h"
#include "tests/health_check.h"
#include "tests/server_process.h"
#include "tests/test_job.h"

namespace gemm {
namespace {

using client::GemmClient;
using testing::HealthCheck;
using testing::ServerProcess;
using testing::TestJob;

// Two CAs; a server certificate for 127.0.0.1 and localhost, and a client
// certificate, from the first; a client certificate from the second.
class Certificates {
 public:
  Certificates() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::string(tmp != nullptr ? tmp : "/tmp") + "/certs";
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1";
    std::ofstream(dir_ + ".ext") << "subjectAltName=DNS:localhost,"
                                    "IP:127.0.0.1,IP:::1\n";
    Run("mkdir -p " + dir_);
    for (const char* ca : {"ca", "other-ca"}) {
      Run("openssl req -x509 " + ec + " -nodes -days 1 -subj /CN=" + ca +
          " -keyout " + Path(std::string(ca) + ".key") + " -out " +
          Path(std::string(ca) + ".pem"));
    }
    Issue("server", "ca", true);
    Issue("client-1", "ca", false);
    Issue("stranger", "other-ca", false);
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  void Run(const std::string& command) {
    ASSERT_EQ(std::system((command + " 2>/dev/null").c_str()), 0) << command;
  }
  void Issue(const std::string& name, const std::string& ca, bool server) {
    Run("openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
        "-nodes -subj /CN=" +
        name + " -keyout " + Path(name + ".key") + " -out " +
        Path(name + ".csr"));
    Run("openssl x509 -req -days 1 -in " + Path(name + ".csr") + " -CA " +
        Path(ca + ".pem") + " -CAkey " + Path(ca + ".key") +
        " -CAcreateserial -out " + Path(name + ".pem") +
        (server ? " -extfile " + dir_ + ".ext" : ""));
  }
  std::string dir_;
};

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { certs_ = new Certificates(); }
  static void TearDownTestSuite() { delete certs_; }

  // A client of `server` with `options` (target filled in).
  static absl::StatusOr<v1::Timing> RunJob(const ServerProcess& server,
                                           GemmClient::Options options) {
    options.target = server.address();
    options.timeout = absl::Seconds(5);
    auto client = GemmClient::Create(options);
    if (!client.ok()) return client.status();
    TestJob job(33, 17, 9);
    absl::StatusOr<v1::Timing> timing =
        (*client)->Gemm(job.args, job.out.data());
    if (timing.ok()) {
      EXPECT_LE(job.Error(), 1e-5);
    }
    return timing;
  }
  static GemmClient::Options Trusting() {
    GemmClient::Options options;
    options.tls_ca_file = certs_->Path("ca.pem");
    return options;
  }
  static std::vector<std::string> ServerTls() {
    return {"--tls-cert", certs_->Path("server.pem"), "--tls-key",
            certs_->Path("server.key")};
  }
  static Certificates* certs_;
};
Certificates* TlsTest::certs_ = nullptr;

TEST_F(TlsTest, AClientThatTrustsTheCaIsServedAndOthersAreNot) {
  std::vector<std::string> flags = ServerTls();
  flags.insert(flags.end(), {"--log-level", "info"});
  ServerProcess server(flags);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_NE(server.Log().find("; TLS)"), std::string::npos) << server.Log();
  absl::StatusOr<v1::Timing> trusted = RunJob(server, Trusting());
  EXPECT_TRUE(trusted.ok()) << trusted.status();
  // Plaintext to a TLS server, and TLS that trusts another CA.
  absl::StatusOr<v1::Timing> plaintext = RunJob(server, {});
  EXPECT_EQ(plaintext.status().code(), absl::StatusCode::kUnavailable)
      << plaintext.status();
  GemmClient::Options other;
  other.tls_ca_file = certs_->Path("other-ca.pem");
  absl::StatusOr<v1::Timing> untrusted = RunJob(server, other);
  EXPECT_EQ(untrusted.status().code(), absl::StatusCode::kUnavailable)
      << untrusted.status();
  EXPECT_NE(untrusted.status().message().find("TLS"), std::string::npos)
      << "the failure says it is TLS's: " << untrusted.status();
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST_F(TlsTest, MutualTlsWantsACertificateFromItsCa) {
  std::vector<std::string> flags = ServerTls();
  flags.insert(flags.end(), {"--tls-client-ca", certs_->Path("ca.pem")});
  ServerProcess server(flags);
  ASSERT_TRUE(server.Start().ok());
  GemmClient::Options member = Trusting();
  member.tls_cert_file = certs_->Path("client-1.pem");
  member.tls_key_file = certs_->Path("client-1.key");
  absl::StatusOr<v1::Timing> served = RunJob(server, member);
  EXPECT_TRUE(served.ok()) << served.status();
  EXPECT_FALSE(RunJob(server, Trusting()).ok()) << "no client certificate";
  GemmClient::Options stranger = Trusting();
  stranger.tls_cert_file = certs_->Path("stranger.pem");
  stranger.tls_key_file = certs_->Path("stranger.key");
  EXPECT_FALSE(RunJob(server, stranger).ok()) << "a certificate of another CA";
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST_F(TlsTest, TokensAreAskedOfEveryCallButHealthChecks) {
  const std::string tokens = certs_->Path("tokens");
  std::ofstream(tokens) << "# name token\nalice 0123456789abcdef0123456789\n";
  std::ofstream(certs_->Path("alice.token")) << "0123456789abcdef0123456789\n";
  std::ofstream(certs_->Path("wrong.token")) << "0123456789abcdef0123456780\n";
  std::vector<std::string> flags = ServerTls();
  flags.insert(flags.end(), {"--token-file", tokens});
  ServerProcess server(flags);
  ASSERT_TRUE(server.Start().ok());
  GemmClient::Options alice = Trusting();
  alice.token_file = certs_->Path("alice.token");
  absl::StatusOr<v1::Timing> served = RunJob(server, alice);
  EXPECT_TRUE(served.ok()) << served.status();
  absl::StatusOr<v1::Timing> none = RunJob(server, Trusting());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated)
      << none.status();
  EXPECT_NE(none.status().message().find("token"), std::string::npos);
  GemmClient::Options wrong = Trusting();
  wrong.token_file = certs_->Path("wrong.token");
  EXPECT_EQ(RunJob(server, wrong).status().code(),
            absl::StatusCode::kUnauthenticated);
  // A stream is refused too.
  GemmClient::Options streamed = Trusting();
  streamed.max_unary_bytes = 0;
  EXPECT_EQ(RunJob(server, streamed).status().code(),
            absl::StatusCode::kUnauthenticated);
  grpc::SslCredentialsOptions ssl;
  std::ifstream ca(certs_->Path("ca.pem"));
  ssl.pem_root_certs.assign(std::istreambuf_iterator<char>(ca), {});
  EXPECT_EQ(HealthCheck(server.address(), grpc::SslCredentials(ssl)), 1)
      << "health needs no token";
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// With tokens, a client's share is its token's: two tokens from one
// address are two clients.
TEST_F(TlsTest, EachTokenHasAShareOfItsOwn) {
  const std::string tokens = certs_->Path("two-tokens");
  std::ofstream(tokens) << "alice 0123456789abcdef0123456789\n"
                           "bob   abcdef0123456789abcdef0123\n";
  std::vector<std::string> flags = ServerTls();
  flags.insert(flags.end(), {"--token-file", tokens, "--max-client-jobs", "2"});
  ServerProcess server(flags);
  ASSERT_TRUE(server.Start().ok());
  grpc::SslCredentialsOptions ssl;
  std::ifstream ca(certs_->Path("ca.pem"));
  ssl.pem_root_certs.assign(std::istreambuf_iterator<char>(ca), {});
  auto channel_of = [&](const std::string& token) {
    return grpc::CreateChannel(
        server.address(),
        grpc::CompositeChannelCredentials(grpc::SslCredentials(ssl),
                                          grpc::AccessTokenCredentials(token)));
  };
  // Alice declares two jobs and sends nothing: her share is full.
  auto alice =
      v1::GemmService::NewStub(channel_of("0123456789abcdef0123456789"));
  grpc::ClientContext alice_context;
  auto stream = alice->GemmStream(&alice_context);
  for (uint64_t id = 1; id <= 3; ++id) {
    v1::StreamRequest declare;
    declare.set_job_id(id);
    declare.mutable_params()->set_m(8);
    declare.mutable_params()->set_n(8);
    declare.mutable_params()->set_k(8);
    declare.mutable_params()->set_alpha(1);
    ASSERT_TRUE(stream->Write(declare));
  }
  v1::StreamResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.job_id(), 3u);
  EXPECT_EQ(response.end().code(), grpc::UNAVAILABLE);
  EXPECT_NE(response.end().message().find("client token:alice holds 2 jobs"),
            std::string::npos)
      << response.end().message();
  // Bob, from the same address, is served.
  auto bob = v1::GemmService::NewStub(channel_of("abcdef0123456789abcdef0123"));
  grpc::ClientContext bob_context;
  bob_context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(5));
  v1::GemmRequest request;
  request.mutable_params()->set_m(2);
  request.mutable_params()->set_n(2);
  request.mutable_params()->set_k(2);
  request.mutable_params()->set_alpha(1);
  const std::vector<float> ones(4, 1.0f);
  request.set_a(ones.data(), 16);
  request.set_b(ones.data(), 16);
  v1::GemmResponse answer;
  const grpc::Status status = bob->Gemm(&bob_context, request, &answer);
  EXPECT_TRUE(status.ok()) << status.error_message();
  alice_context.TryCancel();
  EXPECT_EQ(stream->Finish().error_code(), grpc::CANCELLED);
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// With tokens, regions are the token's: two callers on one host, from one
// address, cannot see or name each other's regions.
TEST_F(TlsTest, EachTokenHasRegionsOfItsOwn) {
  const std::string tokens = certs_->Path("region-tokens");
  std::ofstream(tokens) << "alice 0123456789abcdef0123456789\n"
                           "bob   abcdef0123456789abcdef0123\n";
  std::ofstream(certs_->Path("a.token")) << "0123456789abcdef0123456789\n";
  std::ofstream(certs_->Path("b.token")) << "abcdef0123456789abcdef0123\n";
  std::vector<std::string> flags = ServerTls();
  flags.insert(flags.end(), {"--token-file", tokens});
  ServerProcess server(flags);
  ASSERT_TRUE(server.Start().ok());
  auto connect = [&](const std::string& token_file) {
    GemmClient::Options options = Trusting();
    options.target = server.address();
    options.token_file = token_file;
    auto client = GemmClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return std::move(*client);
  };
  auto alice = connect(certs_->Path("a.token"));
  auto bob = connect(certs_->Path("b.token"));
  auto shm = client::SharedMemoryRegion::Create(
      client::SharedMemoryRegion::UniqueKey("tls"), 4096);
  ASSERT_TRUE(shm.ok()) << shm.status();
  std::fill_n((*shm)->floats(), 1024, 1.0f);
  ASSERT_TRUE(alice->RegisterRegion((*shm)->Describe("r")).ok());
  client::GemmArgs args;
  args.problem = {16, 16, 16, false, false, 1.0f, 0.0f};
  args.a_region = {"r", 0};
  args.b_region = {"r", 1024};
  std::vector<float> out(256);
  auto timing = alice->Gemm(args, out.data());
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_EQ(out[0], 16.0f);
  auto theirs = bob->ListRegions();
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_TRUE(theirs->empty());
  EXPECT_EQ(bob->Gemm(args, out.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bob->UnregisterRegion("r").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(alice->UnregisterRegion("r").ok());
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST_F(TlsTest, BadSecurityFlagsAreRefusedAtStart) {
  ServerProcess key_only({"--tls-key", certs_->Path("server.key")});
  EXPECT_FALSE(key_only.Start().ok());
  EXPECT_NE(key_only.Log().find("--tls-cert and --tls-key go together"),
            std::string::npos)
      << key_only.Log();
  const std::string absent = certs_->Path("no-such.pem");
  ServerProcess missing({"--tls-cert", absent, "--tls-key", absent});
  EXPECT_FALSE(missing.Start().ok());
  EXPECT_NE(missing.Log().find("--tls-cert " + absent), std::string::npos)
      << missing.Log();
  GemmClient::Options plaintext_token;
  plaintext_token.token_file = certs_->Path("alice.token");
  EXPECT_FALSE(GemmClient::Create(plaintext_token).ok())
      << "a token only over TLS";
}

}  // namespace
}  // namespace gemm
