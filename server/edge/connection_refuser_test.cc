#include "server/edge/connection_refuser.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/wait_until.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace gemm::server {
namespace {

// A loopback listener whose every connection goes to a ConnectionRefuser.
class RefusingListener {
 public:
  // `one_client`: every connection counts as one client's (else they are
  // spread over 16 names).
  explicit RefusingListener(const std::string& reason, bool one_client = false)
      : reason_(reason), one_client_(one_client) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    bind(listener_, reinterpret_cast<sockaddr*>(&address), length);
    listen(listener_, 128);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] {
      while (true) {
        const int fd =
            accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;  // the listener was shut down
        refuser_.Refuse(fd, reason_,
                        one_client_ ? std::string("one")
                                    : "client-" + std::to_string(fd % 16));
      }
    });
  }
  ~RefusingListener() {
    shutdown(listener_, SHUT_RDWR);
    thread_.join();
    close(listener_);
  }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  ConnectionRefuser& refuser() { return refuser_; }

 private:
  const std::string reason_;
  const bool one_client_;
  ConnectionRefuser refuser_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

grpc::Status GenericCall(const std::string& target) {
  auto channel =
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1), response;
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&context, "/gemm.v1.GemmService/Info", grpc::StubOptions(),
                 &request, &response, [&](grpc::Status s) {
                   status = s;
                   done.Notify();
                 });
  done.WaitForNotification();
  return status;
}

TEST(ConnectionRefuserTest, AGrpcClientReadsTheReason) {
  const std::string reason =
      "127.0.0.1 holds 1024 connections (--max-client-connections 1024); "
      "caf\xc3\xa9 100%";
  RefusingListener listener(reason);
  const grpc::Status status = GenericCall(listener.target());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << status.error_message();
  EXPECT_EQ(status.error_message(),
            "gemm-server refused the connection: " + reason);
  EXPECT_GE(listener.refuser().answered(), 1u);
}

TEST(ConnectionRefuserTest, AClientThatKeepsSendingHoldsNoOneElseUp) {
  // A refused client streaming frames without end: the others are still
  // answered, and its connection is closed at kLinger.
  RefusingListener listener("too many");
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(
      std::stoi(listener.target().substr(listener.target().find(':') + 1)));
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
            0);
  std::atomic<bool> closed{false};
  std::thread flood([fd, &closed] {
    std::string bytes = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    // DATA frames of 16 KiB on stream 1, without end.
    std::string frame = {0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01};
    frame.resize(9 + 16384, 'x');
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(8);
    while (std::chrono::steady_clock::now() < until) {
      bytes += frame;
      if (send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) < 0) {
        closed = true;
        return;
      }
      bytes.clear();
    }
  });
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status other = GenericCall(listener.target());
  EXPECT_EQ(other.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << other.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  flood.join();
  EXPECT_TRUE(closed) << "the flooding connection outlived kLinger";
  close(fd);
}

// A connected socket to `target` ("127.0.0.1:PORT").
int Connect(const std::string& target) {
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(std::stoi(target.substr(target.find(':') + 1)));
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(ConnectionRefuserTest, AClientStartingCallAfterCallGetsAFewAnswers) {
  // Each empty HEADERS frame (9 bytes) would cost an answer of ~170: past
  // kMaxCallsAnswered the connection goes.
  RefusingListener listener("too many");
  const int fd = Connect(listener.target());
  ASSERT_GE(fd, 0);
  std::string bytes = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  for (uint32_t stream = 1; stream < 2000; stream += 2) {
    bytes += {0x00, 0x00, 0x00, 0x01, 0x04};
    bytes.push_back(static_cast<char>(stream >> 24));
    bytes.push_back(static_cast<char>(stream >> 16));
    bytes.push_back(static_cast<char>(stream >> 8));
    bytes.push_back(static_cast<char>(stream));
  }
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
  std::string got;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) got.append(buffer, n);
  const std::string answer = ConnectionRefuser::RefusedCall(1, "too many");
  const size_t answers =
      (got.size() - 9 - ConnectionRefuser::GoAway(15, "too many").size()) /
      answer.size();
  EXPECT_EQ(answers, static_cast<size_t>(ConnectionRefuser::kMaxCallsAnswered));
  EXPECT_EQ(
      got.substr(got.size() - ConnectionRefuser::GoAway(15, "too many").size()),
      ConnectionRefuser::GoAway(15, "too many"));
  close(fd);
}

// Waits (10 s at most) until the refuser has answered or closed `count`
// sockets.
void WaitForDecisions(const ConnectionRefuser& refuser, size_t count) {
  testing::WaitUntil(
      [&] { return refuser.answered() + refuser.closed_at_once() >= count; },
      absl::Seconds(10), absl::Milliseconds(10));
}

TEST(ConnectionRefuserTest, OneClientHoldsAFewOfThePendingPlaces) {
  RefusingListener listener("too many", /*one_client=*/true);
  std::vector<int> fds;
  const size_t flood = ConnectionRefuser::kMaxPendingPerClient + 4;
  for (size_t i = 0; i < flood; ++i) fds.push_back(Connect(listener.target()));
  WaitForDecisions(listener.refuser(), flood);
  EXPECT_EQ(listener.refuser().answered(),
            static_cast<uint64_t>(ConnectionRefuser::kMaxPendingPerClient));
  EXPECT_EQ(listener.refuser().closed_at_once(), 4u);
  for (int fd : fds) close(fd);
}

TEST(ConnectionRefuserTest, AFloodIsClosedPastThePendingBound) {
  RefusingListener listener("too many");
  // Plain connections that say nothing: each is held until kLinger.
  std::vector<int> fds;
  const size_t flood = ConnectionRefuser::kMaxPending + 16;
  for (size_t i = 0; i < flood; ++i) {
    fds.push_back(Connect(listener.target()));
    ASSERT_GE(fds.back(), 0);
  }
  WaitForDecisions(listener.refuser(), flood);
  EXPECT_EQ(listener.refuser().answered(), ConnectionRefuser::kMaxPending);
  EXPECT_EQ(listener.refuser().closed_at_once(), 16u);
  // An answered connection reads the server's SETTINGS, then GOAWAY and
  // end-of-file within kLinger.
  std::string got;
  char buffer[256];
  ssize_t n;
  while ((n = recv(fds[0], buffer, sizeof(buffer), 0)) > 0)
    got.append(buffer, n);
  EXPECT_EQ(got.substr(0, 9), ConnectionRefuser::ServerPreface());
  EXPECT_EQ(got.substr(9), ConnectionRefuser::GoAway(0, "too many"));
  for (int fd : fds) close(fd);
}

}  // namespace
}  // namespace gemm::server
