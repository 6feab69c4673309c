#include "server/edge/connection_limiter.h"

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/edge/client_identity.h"

namespace gemm::server {
namespace {

// A loopback listener and the server ends of connections made to it.
class Loopback {
 public:
  Loopback() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    listen(listener_, 64);
    socklen_t length = sizeof(address_);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address_), &length);
  }
  ~Loopback() {
    for (int fd : clients_) close(fd);
    close(listener_);
  }
  // The server's end of a new connection.
  int Accept() {
    const int client = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&address_),
                      sizeof(address_)),
              0);
    clients_.push_back(client);
    return accept(listener_, nullptr, nullptr);
  }
  // The client's end of the last connection.
  int last_client() const { return clients_.back(); }

 private:
  int listener_ = -1;
  sockaddr_in address_ = {};
  std::vector<int> clients_;
};

TEST(ClientIdentityTest, PeerStringsAndSocketsNameTheSameClient) {
  EXPECT_EQ(ClientIdentityOfPeer("ipv4:10.1.2.3:5555"), "10.1.2.3");
  EXPECT_EQ(ClientIdentityOfPeer("ipv6:%5B::1%5D:5555"), "::1");
  EXPECT_EQ(ClientIdentityOfPeer("ipv6:[::1]:5555"), "::1");
  EXPECT_EQ(ClientIdentityOfPeer("ipv6:[::ffff:10.1.2.3]:5555"), "10.1.2.3");
  // Region registration is local by default (--regions local).
  EXPECT_TRUE(IsLoopbackPeer("ipv4:127.0.0.1:5555"));
  EXPECT_TRUE(IsLoopbackPeer("ipv4:127.3.2.1:5555"));
  EXPECT_TRUE(IsLoopbackPeer("ipv6:%5B::1%5D:5555"));
  EXPECT_TRUE(IsLoopbackPeer("ipv6:[::ffff:127.0.0.1]:5555"));
  EXPECT_TRUE(IsLoopbackPeer("unix:/tmp/gemm.sock"));
  EXPECT_FALSE(IsLoopbackPeer("ipv4:10.1.2.3:5555"));
  EXPECT_FALSE(IsLoopbackPeer("ipv6:[::ffff:10.1.2.3]:5555"));
  EXPECT_FALSE(IsLoopbackPeer("ipv6:[fe80::1]:5555"));
  EXPECT_FALSE(IsLoopbackPeer("ipv4:1127.0.0.1:5555"));
  EXPECT_FALSE(IsLoopbackPeer("garbage"));
  // Without the zone, as a socket's getpeername() text gives it: the two
  // must agree for the limiter to find a client's connections.
  EXPECT_EQ(ClientIdentityOfPeer("ipv6:%5Bfe80::1%25eth0%5D:5555"), "fe80::1");
  EXPECT_EQ(ClientIdentityOfPeer("ipv6:[fe80::1%eth0]:5555"), "fe80::1");
  EXPECT_EQ(ClientIdentityOfPeer("unix:/tmp/gemm.sock"), "unix");
  Loopback loopback;
  const int fd = loopback.Accept();
  EXPECT_EQ(ClientIdentityOfSocket(fd), "127.0.0.1");
  close(fd);
  EXPECT_EQ(ClientIdentityOfSocket(fd), "unknown");
}

TEST(ConnectionLimiterTest, AClientAtItsCapIsRefusedUntilOneCloses) {
  ConnectionLimiter limiter({.max_connections_per_client = 3});
  Loopback loopback;
  std::vector<int> open;
  for (int i = 0; i < 3; ++i) {
    open.push_back(loopback.Accept());
    EXPECT_TRUE(limiter.Admit(open.back()));
  }
  const int fourth = loopback.Accept();
  EXPECT_FALSE(limiter.Admit(fourth));
  close(fourth);
  EXPECT_EQ(limiter.refused(), 1u);
  // A closed connection frees its place, even when its descriptor number is
  // taken again by the next one.
  close(open[1]);
  const int again = loopback.Accept();
  EXPECT_TRUE(limiter.Admit(again));
  EXPECT_EQ(limiter.open(), 3u);
  close(again);
  close(open[0]);
  close(open[2]);
  EXPECT_EQ(limiter.open(), 0u);
}

TEST(ConnectionLimiterTest, OneClientHoldsAtMostHalfOfWhatTheServerCan) {
  // Where the server can hold few connections (a low open-file limit, or
  // --max-connections), one address's flood leaves half for the others.
  ConnectionLimiter limiter(
      {.max_connections = 8, .max_connections_per_client = 1024});
  Loopback loopback;
  std::vector<int> open;
  for (int i = 0; i < 4; ++i) {
    open.push_back(loopback.Accept());
    EXPECT_TRUE(limiter.Admit(open.back()));
  }
  const int fifth = loopback.Accept();
  std::string why;
  bool answerable = false;
  EXPECT_FALSE(limiter.Admit(fifth, &why, &answerable));
  EXPECT_EQ(why,
            "127.0.0.1 holds 4 connections (--max-client-connections 1024, "
            "held to half of the 8 connections the server can hold)");
  EXPECT_TRUE(answerable);
  close(fifth);
  for (int fd : open) close(fd);
}

TEST(ConnectionLimiterTest, TheTotalCapCountsEveryClient) {
  ConnectionLimiter limiter({.max_connections = 2});
  Loopback loopback;
  const int a = loopback.Accept(), b = loopback.Accept();
  const int c = loopback.Accept();
  EXPECT_TRUE(limiter.Admit(a));
  EXPECT_TRUE(limiter.Admit(b));
  EXPECT_FALSE(limiter.Admit(c));
  for (int fd : {a, b, c}) close(fd);
}

TEST(ConnectionLimiterTest, DescriptorsNearTheOpenFileLimitAreRefused) {
  rlimit mine;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &mine), 0);
  rlimit low = mine;
  low.rlim_cur = 128;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  ConnectionLimiter limiter({.reserved_descriptors = 100});
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &mine), 0);
  EXPECT_EQ(limiter.descriptor_ceiling(), 28u);
  Loopback loopback;
  std::vector<int> fds;
  bool refused = false;
  for (int i = 0; i < 40 && !refused; ++i) {
    fds.push_back(loopback.Accept());
    const bool admitted = limiter.Admit(fds.back());
    EXPECT_EQ(admitted, fds.back() < 28) << "descriptor " << fds.back();
    refused = !admitted;
  }
  EXPECT_TRUE(refused);
  for (int fd : fds) close(fd);
}

// A client shut out loses the connections it holds (its end reads EOF, the
// server's descriptors stay open for their owner to close) and has new
// ones refused until the time given; other clients are untouched.
TEST(ConnectionLimiterTest, AClientShutOutLosesItsConnectionsForAWhile) {
  ConnectionLimiter limiter({});
  Loopback loopback;
  std::vector<int> servers, clients;
  for (int i = 0; i < 3; ++i) {
    servers.push_back(loopback.Accept());
    clients.push_back(loopback.last_client());
    ASSERT_TRUE(limiter.Admit(servers.back()));
  }
  EXPECT_EQ(limiter.ShutOut("10.9.9.9", absl::Now() + absl::Hours(1)), 0u)
      << "another client";
  EXPECT_EQ(limiter.ShutOut("127.0.0.1", absl::Now() + absl::Seconds(1)), 3u);
  for (int client : clients) {
    char byte;
    EXPECT_EQ(recv(client, &byte, 1, 0), 0) << "EOF at the client";
  }
  const int refused = loopback.Accept();
  EXPECT_FALSE(limiter.Admit(refused)) << "shut out for a second";
  close(refused);
  absl::SleepFor(absl::Seconds(1.2));
  const int later = loopback.Accept();
  EXPECT_TRUE(limiter.Admit(later)) << "admitted once the time is up";
  close(later);
  for (int fd : servers) close(fd);
}

}  // namespace
}  // namespace gemm::server
