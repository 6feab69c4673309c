// Issue 12: CONTINUATION floods. A client that opens a call whose header
// block never ends and streams CONTINUATION frames keeps whichever thread
// parses its connection busy for as long as it sends: gRPC 1.51's HPACK
// parser copies the unfinished field again at every frame (fixed in gRPC
// 1.56.2). These tests attack a real gemm-server process that way and
// check that others still connect, and that the server still stops.
//
// A known limit of gRPC 1.51, not of the server: when gRPC has moved the
// flood's parsing onto its default executor (a transport's pending work
// goes there when the thread running it has other work waiting), work of
// other connections that gRPC queues on that executor thread waits until
// the flood ends. A new connection then waits too: about 1 run in 20 of
// AContinuationFloodLeavesOthersConnecting, on an idle host and a busy one
// alike (decision 0062). So the target is marked flaky, and Bazel reruns
// it (up to three attempts) where it fails; the defect the test was
// written for, an accept loop held by the flood, fails every attempt.
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "common/wait_until.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/hostile/hostile_client.h"
#include "tests/hostile/loopback_connections.h"
#include "tests/metrics_scrape.h"
#include "tests/server_process.h"

namespace gemm {
namespace {

using testing::CallInfo;
using testing::ConnectMany;
using testing::HpackInt;
using testing::Http2Frame;
using testing::MetricsEndpoint;
using testing::ServerProcess;
using testing::VictimJobs;
using testing::WaitUntil;

// Until `stop`: connects to 127.0.0.1:`port`, opens a call whose header
// block never ends (HEADERS without END_HEADERS, one literal field whose
// value is announced as 1 GiB) and sends CONTINUATION frames of that value
// for as long as the connection lasts; then connects again.
void FloodContinuationFrames(int port, const std::atomic<bool>& stop) {
  constexpr uint8_t kHeaders = 0x1, kSettings = 0x4, kContinuation = 0x9;
  const std::string path = "/gemm.v1.GemmService/Gemm";
  // :method POST, :scheme http (static table), :path (literal), then the
  // field that never ends.
  const std::string block =
      std::string("\x83\x86\x04") + HpackInt(path.size(), 7) + path +
      std::string("\x00\x07x-flood", 9) + HpackInt(uint64_t{1} << 30, 7);
  const std::string opening = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") +
                              Http2Frame(kSettings, 0, 0, "") +
                              Http2Frame(kHeaders, 0, 1, block);
  std::string frames;
  for (int i = 0; i < 16; ++i) {
    frames += Http2Frame(kContinuation, 0, 1, std::string(16384, 'a'));
  }
  while (!stop) {
    std::vector<int> connection = ConnectMany(port, 1);
    if (connection.empty()) {
      // The attack itself: it reconnects at its own pace, whatever the
      // server does.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    const int fd = connection[0];
    timeval timeout = {0, 100000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    bool open = send(fd, opening.data(), opening.size(), MSG_NOSIGNAL) ==
                static_cast<ssize_t>(opening.size());
    size_t sent = 0;
    while (open && !stop) {
      const ssize_t n =
          send(fd, frames.data() + sent, frames.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent = (sent + n) % frames.size();
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                 errno != EINTR) {
        open = false;
      }
    }
    close(fd);
  }
}

// Waits (up to 10 s) until the server of `metrics` has handed a flooding
// connection to gRPC: a hand-off runs now, or hand-offs have taken time.
bool WaitForTheFloodsHandOff(const MetricsEndpoint& metrics) {
  return WaitUntil(
      [&] {
        const std::string text = metrics.Scrape();
        return testing::MetricSample(text, "gemm_connection_handoffs ") >= 1 ||
               testing::MetricSample(
                   text, "gemm_connection_handoff_seconds_total ") > 0;
      },
      absl::Seconds(10), absl::Milliseconds(20));
}

// A client sending endless CONTINUATION frames kept the thread that handed
// its connection to gRPC: gRPC 1.51 went on parsing that connection (its
// HPACK parser copies the unfinished field for every frame, a core's worth)
// inside the hand-off call, which was made on the accept loop. No other
// client could connect until the flood ended. Now hand-offs run on threads
// of their own.
TEST(ConnectionTest, AContinuationFloodLeavesOthersConnecting) {
  const MetricsEndpoint metrics_endpoint("continuation");
  std::vector<std::string> flags = {"--listen", "[::]:0"};
  for (const std::string& flag : metrics_endpoint.Flags()) {
    flags.push_back(flag);
  }
  ServerProcess server(flags);
  ASSERT_TRUE(server.Start().ok());
  std::atomic<bool> stop{false};
  std::thread flood([&] { FloodContinuationFrames(server.port(), stop); });
  EXPECT_TRUE(WaitForTheFloodsHandOff(metrics_endpoint)) << server.Log();
  // Before the fix no connection was taken until the flood ended, however
  // long; the flood's parsing still takes a core, so on a busy 2-core
  // machine (tests running beside this one) the call may be slow: it once
  // took over 5 s.
  const grpc::Status during =
      CallInfo(server.address_v6(), std::chrono::seconds(20));
  EXPECT_TRUE(during.ok()) << "a new connection during the flood: "
                           << during.error_message();
  // The hand-offs are counted (how much of the flood's parsing falls
  // inside them varies from run to run: gRPC's own threads take the rest).
  ASSERT_GT(metrics_endpoint.port(), 0) << server.Log();
  const std::string metrics = metrics_endpoint.Scrape();
  EXPECT_GT(
      testing::MetricSample(metrics, "gemm_connection_handoff_seconds_total "),
      0);
  EXPECT_EQ(
      testing::MetricSample(metrics, "gemm_connection_handoffs_closed_total "),
      0);
  stop = true;
  flood.join();
  const grpc::Status after = CallInfo(server.address_v6());
  EXPECT_TRUE(after.ok()) << "after the flood: " << after.error_message();
  EXPECT_EQ(VictimJobs(server.address_v6(), 3), 3);
  // It exits, but not always cleanly: gRPC may still be parsing what it
  // read of the flood (the parser's copies grow with the square of the
  // header), inside a hand-off whose acceptor's lock its Shutdown waits
  // for, and shutting the socket down does not stop that; the watchdog
  // then ends the process (exit 1) 5 s after the grace period.
  EXPECT_NE(server.Stop(SIGTERM), -1);
}

// gRPC's Server::Shutdown takes every connection acceptor's lock first,
// and a hand-off that a flood keeps reading holds its acceptor's: a server
// told to stop during a CONTINUATION flood waited until the watchdog ended
// it (exit 1, "a job is still in the executor"). Now, past the grace
// period, the sockets of hand-offs still running are shut down, and the
// shutdown goes on.
TEST(ConnectionTest, AServerStopsWithinItsGraceDuringAContinuationFlood) {
  const MetricsEndpoint metrics("continuation-at-shutdown");
  std::vector<std::string> flags = {
      "--listen", "[::]:0", "--shutdown-grace-s", "1", "--drain-delay-s", "0"};
  for (const std::string& flag : metrics.Flags()) flags.push_back(flag);
  ServerProcess server(flags);
  ASSERT_TRUE(server.Start().ok());
  std::atomic<bool> stop{false};
  std::thread flood([&] { FloodContinuationFrames(server.port(), stop); });
  EXPECT_TRUE(WaitForTheFloodsHandOff(metrics)) << server.Log();
  EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Log();
  stop = true;
  flood.join();
}

}  // namespace
}  // namespace gemm
