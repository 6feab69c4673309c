// Issue 12: one client cannot take the server down. Each test attacks a real
// gemm-server process the way a hostile client would and checks that the
// server bounds what the attack makes it hold, or that another client is
// still served. Here attacks on connections (descriptor floods, rapid
// resets); continuation_flood_test.cc has CONTINUATION floods, and
// hostile_client_test_share.cc attacks on a client's share of jobs, bytes
// and unary reads.
#include "tests/hostile/hostile_client.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/wait_until.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/gemm.grpc.pb.h"
#include "tests/hostile/loopback_connections.h"
#include "tests/metrics_scrape.h"
#include "tests/server_process.h"

namespace gemm {
namespace {

using testing::CallInfo;
using testing::ConnectMany;
using testing::FreshTestFile;
using testing::HpackInt;
using testing::Http2Frame;
using testing::MetricsEndpoint;
using testing::ServerProcess;
using testing::VictimJobs;
using testing::WaitUntil;

// 400 connections under an open-file limit of 256 made gRPC's accept4()
// fail with EMFILE once, after which the listener never accepted again:
// the server lived on, unreachable.
TEST(ConnectionTest, TheListenerOutlivesAFloodOfConnections) {
  ServerProcess server({"--listen", "[::]:0", "--max-client-connections", "100",
                        "--log-level", "info"});
  server.set_open_file_limit(256);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_TRUE(CallInfo(server.address()).ok());
  std::vector<int> flood = ConnectMany(server.port(), 400);
  EXPECT_EQ(flood.size(), 400u);
  // The flood has reached the server once it refuses the first of it.
  EXPECT_TRUE(WaitUntil(
      [&] {
        return server.Log().find("refused a connection from 127.0.0.1") !=
               std::string::npos;
      },
      absl::Seconds(10)))
      << server.Log();
  // The flood came from 127.0.0.1; [::1] is another client.
  const grpc::Status during = CallInfo(server.address_v6());
  EXPECT_TRUE(during.ok()) << "another client during the flood: "
                           << during.error_message();
  for (int fd : flood) close(fd);
  // The server sees the flood's connections close, and 127.0.0.1 is
  // served again.
  grpc::Status after;
  EXPECT_TRUE(WaitUntil(
      [&] {
        after = CallInfo(server.address());
        return after.ok();
      },
      absl::Seconds(10), absl::Milliseconds(50)))
      << "after the flood: " << after.error_message();
  EXPECT_NE(server.Log().find("refused a connection from 127.0.0.1"),
            std::string::npos)
      << server.Log();
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// HTTP/2 rapid reset (CVE-2023-44487): calls opened and cancelled at once,
// two frames each for the client, a call's setup and teardown each for the
// server, which gRPC 1.51 does not bound: 40,000 of them kept a 2-core
// server's gRPC threads busy for 6 s, and every other client's calls waited
// behind them. Now a client that cancels more calls before the server read
// them than --max-client-early-cancels allows has its connections closed
// and new ones refused for --shut-out-s; other clients are served.
TEST(ConnectionTest, AClientCancellingCallsUnreadIsShutOut) {
  const MetricsEndpoint metrics("rapid-reset");
  std::vector<std::string> flags = {
      "--listen", "[::]:0",       "--max-client-early-cancels",
      "50",       "--shut-out-s", "60"};
  for (const std::string& flag : metrics.Flags()) flags.push_back(flag);
  ServerProcess server(flags);
  ASSERT_TRUE(server.Start().ok());
  auto stub = v1::GemmService::NewStub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
  // Streams opened and cancelled before they send anything: 40 at a time,
  // left open long enough for the server to begin them (it counts only
  // the calls it saw begin), then all cancelled.
  int refused = 0;
  for (int round = 0; round < 20 && refused == 0; ++round) {
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    std::vector<std::unique_ptr<
        grpc::ClientReaderWriter<v1::StreamRequest, v1::StreamResponse>>>
        streams;
    // The last round's streams may not all have ended on the server yet.
    const double open_before =
        std::max(0.0, metrics.Sample("gemm_open_streams "));
    for (int i = 0; i < 40; ++i) {
      contexts.push_back(std::make_unique<grpc::ClientContext>());
      contexts.back()->set_deadline(std::chrono::system_clock::now() +
                                    std::chrono::seconds(10));
      streams.push_back(stub->GemmStream(contexts.back().get()));
    }
    // Once shut out, the server begins none of them: then the wait ends at
    // its deadline, and the round's calls come back refused.
    WaitUntil(
        [&] {
          return metrics.Sample("gemm_open_streams ") >= open_before + 40;
        },
        absl::Seconds(2), absl::Milliseconds(10));
    for (auto& context : contexts) context->TryCancel();
    for (auto& stream : streams) {
      if (stream->Finish().error_code() == grpc::StatusCode::UNAVAILABLE) {
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 0) << "never refused: the client was not shut out";
  // Shut out: a new connection from the same address is refused.
  EXPECT_FALSE(CallInfo(server.address()).ok());
  // Another client is served.
  EXPECT_TRUE(CallInfo(server.address_v6()).ok());
  EXPECT_EQ(VictimJobs(server.address_v6(), 3), 3);
  ASSERT_GT(metrics.port(), 0) << server.Log();
  EXPECT_GE(metrics.Sample("gemm_clients_shut_out_total "), 1);
  EXPECT_NE(server.Log().find("rapid reset"), std::string::npos)
      << server.Log();
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// HTTP/2 rapid reset on one connection to 127.0.0.1:`port`: `calls` calls
// of `path` opened (HEADERS, as gRPC's clients send them) and reset at once
// (RST_STREAM CANCEL), in writes of 100 pairs. Returns true when the server
// closed the connection within 10 s of the last write (false when it could
// not connect).
bool ResetCalls(int port, const std::string& path, int calls) {
  constexpr uint8_t kHeaders = 0x1, kRstStream = 0x3, kSettings = 0x4;
  constexpr uint8_t kEndHeaders = 0x4;
  // :method POST, :scheme http (static table); :authority, :path,
  // content-type (static names) and te (a new name), literals not indexed.
  const std::string block =
      std::string("\x83\x86\x01\x01t\x04") + HpackInt(path.size(), 7) + path +
      std::string("\x0f\x10") + HpackInt(16, 7) + "application/grpc" +
      std::string("\x00\x02te\x08trailers", 13);
  const std::string cancel("\0\0\0\x08", 4);
  std::vector<int> connection = ConnectMany(port, 1);
  if (connection.empty()) return false;
  const int fd = connection[0];
  std::string out = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") +
                    Http2Frame(kSettings, 0, 0, "");
  bool open = true;
  for (int call = 0; call < calls && open; ++call) {
    const uint32_t stream = 1 + 2 * call;
    out += Http2Frame(kHeaders, kEndHeaders, stream, block) +
           Http2Frame(kRstStream, 0, stream, cancel);
    if (call % 100 == 99 || call + 1 == calls) {
      open = send(fd, out.data(), out.size(), MSG_NOSIGNAL) ==
             static_cast<ssize_t>(out.size());
      out.clear();
    }
  }
  // Whatever the server sends (SETTINGS, its acks, GOAWAY) is read until it
  // closes the connection, or for 10 s.
  timeval timeout = {0, 200000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  char buffer[16384];
  bool closed = !open;
  while (!closed && std::chrono::steady_clock::now() < deadline) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                        errno != EINTR);
  }
  close(fd);
  return closed;
}

// A rapid reset of calls that no reactor of the service reads (Info, the
// region calls, the health check, an unknown method, and with --token-file
// any call of a caller without a token) went uncounted: gRPC ends such a
// call without the service seeing it when it is reset before its request
// arrives, or the service refused it unread. Now the early-cancel guard
// counts every method's.
TEST(ConnectionTest, ARapidResetOfAnyMethodIsShutOut) {
  const std::string tokens = FreshTestFile("rapid-reset.tokens");
  std::ofstream(tokens) << "alice " << std::string(32, 'a') << "\n";
  const std::vector<std::string> with_tokens = {"--token-file", tokens};
  for (const auto& [path, extra] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"/gemm.v1.GemmService/Info", {}},
           {"/gemm.v1.GemmService/ListRegions", {}},
           {"/grpc.health.v1.Health/Check", {}},
           {"/gemm.v1.GemmService/NoSuchMethod", {}},
           {"/gemm.v1.GemmService/GemmStream", {}},
           {"/gemm.v1.GemmService/Gemm", with_tokens},
           {"/gemm.v1.GemmService/GemmStream", with_tokens}}) {
    SCOPED_TRACE(path + (extra.empty() ? "" : " with --token-file"));
    std::vector<std::string> flags = {
        "--listen", "[::]:0",       "--max-client-early-cancels",
        "50",       "--shut-out-s", "60"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    ServerProcess server(flags);
    ASSERT_TRUE(server.Start().ok());
    EXPECT_TRUE(ResetCalls(server.port(), path, 2000))
        << "the connection stayed open\n"
        << server.Log();
    // Shut out: a new connection from the same address is refused;
    // another client is served (Info says UNAUTHENTICATED without a token:
    // an answer all the same).
    EXPECT_EQ(CallInfo(server.address()).error_code(),
              grpc::StatusCode::UNAVAILABLE);
    const grpc::StatusCode other = CallInfo(server.address_v6()).error_code();
    EXPECT_TRUE(other == grpc::StatusCode::OK ||
                other == grpc::StatusCode::UNAUTHENTICATED)
        << other;
    EXPECT_NE(server.Log().find("rapid reset"), std::string::npos)
        << server.Log();
    EXPECT_EQ(server.Stop(SIGTERM), 0);
  }
}

}  // namespace
}  // namespace gemm
