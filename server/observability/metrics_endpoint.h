// MetricsEndpoint: serves a MetricsRegistry's text (metrics.h) at
// http://ADDRESS/metrics over HTTP/1.1, on a port of its own, with
// cpp-httplib (Debian's libcpp-httplib). Only GET and HEAD of /metrics are
// answered; any other path is 404 and any other method 405. It has two
// threads of its own, apart from gRPC's, so a scrape still answers while
// the service is saturated.
//
// (Not civetweb: Debian builds its threads with 100 KiB stacks, of which
// OpenBLAS's thread-local storage takes 60 KiB in gemm-server, and a request
// then overflows the rest; docs/decisions/README.md.)
//
// Thread-safety: thread-safe; `render` is called from the endpoint's
// threads.
//
//   ASSIGN_OR_RETURN(auto endpoint, MetricsEndpoint::Start(
//       "0.0.0.0:9464", [&] { return registry.Render(); }));
//   spdlog::info("metrics on port {}", endpoint->port());
#ifndef GEMM_SERVER_OBSERVABILITY_METRICS_ENDPOINT_H_
#define GEMM_SERVER_OBSERVABILITY_METRICS_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace gemm::server {

class MetricsEndpoint {
 public:
  // `address` is HOST:PORT: an IPv4 address, "[IPv6]" ("[::]" for every
  // interface) or a host name such as "localhost"; PORT 0 picks a free
  // port (see port()). INVALID_ARGUMENT for an address it cannot parse,
  // UNAVAILABLE when it cannot listen there.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& address, std::function<std::string()> render);
  ~MetricsEndpoint();  // stops serving; returns once no scrape is running

  int port() const { return port_; }

 private:
  MetricsEndpoint();

  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  int port_ = 0;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_OBSERVABILITY_METRICS_ENDPOINT_H_
