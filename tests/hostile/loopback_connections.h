// Plain TCP connections to a server on 127.0.0.1, for tests that flood or
// hold connections without speaking HTTP/2.
//
// Thread-safety: a free function.
//
//   std::vector<int> held = ConnectMany(server.port(), 40);
#ifndef GEMM_TESTS_HOSTILE_LOOPBACK_CONNECTIONS_H_
#define GEMM_TESTS_HOSTILE_LOOPBACK_CONNECTIONS_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace gemm::testing {

// Up to `count` connections to 127.0.0.1:`port` (fewer when one fails).
inline std::vector<int> ConnectMany(int port, int count) {
  std::vector<int> fds;
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < count; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) break;
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
        0) {
      close(fd);
      break;
    }
    fds.push_back(fd);
  }
  return fds;
}

}  // namespace gemm::testing

#endif  // GEMM_TESTS_HOSTILE_LOOPBACK_CONNECTIONS_H_
