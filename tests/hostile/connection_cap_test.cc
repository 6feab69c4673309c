// The per-client connection cap (issue 37): its default lets a load
// generator on one host open hundreds of connections; a refused client is
// told why, in a status its gRPC calls fail with; and where callers are
// known by token, the cap counts tokens, not the address they share. A real
// gemm-server on a loopback port, real gRPC clients.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "common/wait_until.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/gemm.grpc.pb.h"
#include "tests/hostile/loopback_connections.h"
#include "tests/server_process.h"

namespace gemm {
namespace {

using testing::ConnectMany;
using testing::ServerProcess;
using testing::WaitUntil;

// Info on a connection of its own (a channel that shares no subchannel),
// with `token` as a bearer token when not empty.
grpc::Status CallInfo(const std::string& target, const std::string& token = "",
                      std::shared_ptr<grpc::Channel>* keep = nullptr) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(
      target, grpc::InsecureChannelCredentials(), args);
  if (keep != nullptr) *keep = channel;
  auto stub = v1::GemmService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  v1::InfoRequest request;
  v1::InfoResponse response;
  return stub->Info(&context, request, &response);
}

// At 82891df one address held at most 32 connections: a load generator
// with 48 connections, or a client with a channel per stream, was refused
// with a bare close.
TEST(ConnectionCapTest, OneAddressHoldsHundredsOfConnectionsByDefault) {
  ServerProcess server;
  ASSERT_TRUE(server.Start().ok());
  std::vector<int> connections = ConnectMany(server.port(), 200);
  ASSERT_EQ(connections.size(), 200u);
  // Every one is handed to gRPC, which sends its SETTINGS (with entries);
  // a refused one would read the refuser's empty SETTINGS, or end-of-file.
  // Each has had its answer once it has a frame header to read, or EOF.
  EXPECT_TRUE(WaitUntil(
      [&] {
        for (int fd : connections) {
          unsigned char frame[9];
          const ssize_t n =
              recv(fd, frame, sizeof(frame), MSG_DONTWAIT | MSG_PEEK);
          if (n != 0 && n != 9) return false;
        }
        return true;
      },
      absl::Seconds(10), absl::Milliseconds(20)))
      << "not every connection was answered";
  int refused = 0;
  for (int fd : connections) {
    unsigned char frame[9];
    const ssize_t n = recv(fd, frame, sizeof(frame), MSG_DONTWAIT);
    refused += n == 0 || (n == 9 && frame[0] == 0 && frame[1] == 0 &&
                          frame[2] == 0 && frame[3] == 4);
  }
  EXPECT_EQ(refused, 0) << "of 200 connections from one address";
  EXPECT_TRUE(CallInfo(server.address()).ok());
  for (int fd : connections) close(fd);
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(ConnectionCapTest, ARefusedClientIsToldWhy) {
  ServerProcess server({"--max-client-connections", "2"});
  ASSERT_TRUE(server.Start().ok());
  std::vector<int> held = ConnectMany(server.port(), 2);
  ASSERT_EQ(held.size(), 2u);
  // At 82891df: UNAVAILABLE, "Socket closed" or "failed to connect".
  const grpc::Status refused = CallInfo(server.address());
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.error_message();
  EXPECT_NE(refused.error_message().find("refused the connection"),
            std::string::npos)
      << refused.error_message();
  EXPECT_NE(refused.error_message().find("--max-client-connections 2"),
            std::string::npos)
      << refused.error_message();
  for (int fd : held) close(fd);
  // Once the client holds fewer, it is served again.
  EXPECT_TRUE(WaitUntil([&] { return CallInfo(server.address()).ok(); },
                        absl::Seconds(5), absl::Milliseconds(100)));
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(ConnectionCapTest, WithTokensTheCapCountsEachTokenNotTheAddress) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string tokens =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/cap-tokens";
  {
    std::ofstream out(tokens);
    out << "alice 0123456789abcdef0123456789abcdef\n"
        << "bob fedcba9876543210fedcba9876543210\n";
  }
  ServerProcess server(
      {"--token-file", tokens, "--max-client-connections", "1"});
  ASSERT_TRUE(server.Start().ok());
  const std::string alice = "0123456789abcdef0123456789abcdef";
  const std::string bob = "fedcba9876543210fedcba9876543210";
  std::shared_ptr<grpc::Channel> first, second;
  ASSERT_TRUE(CallInfo(server.address(), alice, &first).ok());
  // alice's second connection is past her cap of one; bob, from the same
  // address, is not.
  const grpc::Status again = CallInfo(server.address(), alice, &second);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << again.error_message();
  EXPECT_NE(again.error_message().find("'token:alice' holds 1 connections"),
            std::string::npos)
      << again.error_message();
  EXPECT_TRUE(CallInfo(server.address(), bob).ok());
  // alice's first connection still serves her.
  auto stub = v1::GemmService::NewStub(first);
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer " + alice);
  v1::InfoResponse response;
  EXPECT_TRUE(stub->Info(&context, v1::InfoRequest(), &response).ok());
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(ConnectionCapTest, WithTokensTheAddressCapNamesItsOwnFlag) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string tokens =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/address-tokens";
  {
    std::ofstream out(tokens);
    out << "alice 0123456789abcdef0123456789abcdef\n";
  }
  ServerProcess server(
      {"--token-file", tokens, "--max-address-connections", "2"});
  ASSERT_TRUE(server.Start().ok());
  std::vector<int> held = ConnectMany(server.port(), 2);
  ASSERT_EQ(held.size(), 2u);
  const grpc::Status refused =
      CallInfo(server.address(), "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.error_message();
  EXPECT_NE(refused.error_message().find("--max-address-connections 2"),
            std::string::npos)
      << refused.error_message();
  for (int fd : held) close(fd);
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace gemm
