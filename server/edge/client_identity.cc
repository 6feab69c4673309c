#include "server/edge/client_identity.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace gemm::server {
namespace {

constexpr absl::string_view kMappedPrefix = "::ffff:";

// "::ffff:10.0.0.7" -> "10.0.0.7" (an IPv4 client of a dual-stack socket).
std::string Unmapped(absl::string_view address) {
  if (absl::StartsWithIgnoreCase(address, kMappedPrefix) &&
      address.find('.') != absl::string_view::npos) {
    address.remove_prefix(kMappedPrefix.size());
  }
  return std::string(address);
}

}  // namespace

std::string ClientIdentityOfPeer(absl::string_view peer) {
  if (absl::ConsumePrefix(&peer, "ipv4:")) {
    return std::string(peer.substr(0, peer.rfind(':')));
  }
  if (absl::ConsumePrefix(&peer, "ipv6:")) {
    // "[addr]:port", the brackets percent-encoded as in a URI ("%5B::1%5D"),
    // the address possibly with a zone ("%25eth0" or "%eth0").
    if (absl::ConsumePrefix(&peer, "%5B") || absl::ConsumePrefix(&peer, "[")) {
      size_t end = peer.find("%5D");
      if (end == absl::string_view::npos) end = peer.find(']');
      peer = peer.substr(0, end);
    }
    // The zone is dropped, as ClientIdentityOfSocket's inet_ntop() text
    // has none: both must name a link-local client alike, or the limiter
    // could not find its connections (ShutOut).
    return Unmapped(peer.substr(0, peer.find('%')));
  }
  if (absl::StartsWith(peer, "unix:") ||
      absl::StartsWith(peer, "unix-abstract:")) {
    return "unix";
  }
  return std::string(peer);
}

bool IsLoopbackPeer(absl::string_view peer) {
  if (absl::StartsWith(peer, "unix:") ||
      absl::StartsWith(peer, "unix-abstract:")) {
    return true;
  }
  if (!absl::StartsWith(peer, "ipv4:") && !absl::StartsWith(peer, "ipv6:")) {
    return false;
  }
  const std::string address = ClientIdentityOfPeer(peer);
  return absl::StartsWith(address, "127.") || address == "::1";
}

std::string ClientIdentityOfSocket(int fd) {
  sockaddr_storage address;
  socklen_t length = sizeof(address);
  std::memset(&address, 0, sizeof(address));
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return "unknown";
  }
  char text[INET6_ADDRSTRLEN] = {};
  switch (address.ss_family) {
    case AF_INET: {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
      inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
      return text;
    }
    case AF_INET6: {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
      inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
      return Unmapped(text);
    }
    case AF_UNIX:
      return "unix";
    default:
      return "unknown";
  }
}

}  // namespace gemm::server
