// Who a client is, for the per-client limits (connections, in-flight bytes,
// jobs): the address it connects from, without the port, so that the
// connections and calls of one host count together. gRPC names a call's
// peer "ipv4:10.0.0.7:51234", "ipv6:%5B::1%5D:51234" or "unix:..."; an accepted
// socket is named from getpeername(). Both spellings give the same identity
// ("10.0.0.7", "::1", "unix"), an IPv4 address mapped into IPv6 (a
// dual-stack listener) counts as the IPv4 address, and a link-local IPv6
// address is named without its zone ("fe80::1", not "fe80::1%eth0").
//
// Thread-safety: free functions.
//
//   std::string who = ClientIdentityOfPeer(context->peer());
//   std::string same = ClientIdentityOfSocket(fd);
#ifndef GEMM_SERVER_EDGE_CLIENT_IDENTITY_H_
#define GEMM_SERVER_EDGE_CLIENT_IDENTITY_H_

#include <string>

#include "absl/strings/string_view.h"

namespace gemm::server {

// From a gRPC peer string; an unrecognized one is its own identity.
std::string ClientIdentityOfPeer(absl::string_view peer);

// From a connected socket's peer address; "unknown" when it has none.
std::string ClientIdentityOfSocket(int fd);

// Whether a gRPC peer string is on this host by its address: a loopback
// address (127.0.0.0/8, ::1, or 127.x mapped into IPv6) or a Unix socket.
bool IsLoopbackPeer(absl::string_view peer);

}  // namespace gemm::server

#endif  // GEMM_SERVER_EDGE_CLIENT_IDENTITY_H_
