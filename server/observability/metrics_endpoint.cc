#include "server/observability/metrics_endpoint.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gemm::server {
namespace {

constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

struct HostPort {
  std::string host;
  int port = 0;
};

absl::StatusOr<HostPort> ParseAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  HostPort out;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &out.port) || out.port < 0 ||
      out.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-listen: want HOST:PORT (0.0.0.0:9464, [::]:9464, say), "
        "got '",
        address, "'"));
  }
  out.host = address.substr(0, colon);
  if (out.host.size() >= 2 && out.host.front() == '[' &&
      out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  return out;
}

}  // namespace

MetricsEndpoint::MetricsEndpoint()
    : http_(std::make_unique<httplib::Server>()) {}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& address, std::function<std::string()> render) {
  HostPort where;
  {
    absl::StatusOr<HostPort> parsed = ParseAddress(address);
    if (!parsed.ok()) return parsed.status();
    where = *std::move(parsed);
  }
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  httplib::Server& http = *endpoint->http_;
  // Two threads: scrapes are rare; a third scraper waits for one.
  http.new_task_queue = [] { return new httplib::ThreadPool(2); };
  http.set_read_timeout(10, 0);
  http.set_write_timeout(10, 0);
  // One request per connection: a scraper's idle keep-alive connection
  // would hold a worker, and stop() would wait for it to time out.
  http.set_keep_alive_max_count(1);
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, with which a
  // second server on the same address would bind too and take half the
  // scrapes.
  http.set_socket_options([](int socket) {
    int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  auto serve = [render = std::move(render)](const httplib::Request& request,
                                            httplib::Response& response) {
    // HEAD is answered through the GET handler, without the body.
    (void)request;
    response.set_content(render(), kContentType);
  };
  http.Get("/metrics", serve);
  auto not_allowed = [](const httplib::Request&, httplib::Response& response) {
    response.status = 405;
    response.set_header("Allow", "GET, HEAD");
    response.set_content("only GET and HEAD of /metrics\n", "text/plain");
  };
  http.Post("/metrics", not_allowed);
  http.Put("/metrics", not_allowed);
  http.Delete("/metrics", not_allowed);
  http.Patch("/metrics", not_allowed);
  http.Options("/metrics", not_allowed);
  endpoint->port_ =
      where.port == 0
          ? http.bind_to_any_port(where.host)
          : (http.bind_to_port(where.host, where.port) ? where.port : -1);
  if (endpoint->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("--metrics-listen: cannot serve metrics on ", address,
                     " (address in use, or not an address of this host?)"));
  }
  auto ended = std::make_shared<std::atomic<bool>>(false);
  endpoint->listener_ = std::thread([&http, ended] {
    http.listen_after_bind();
    ended->store(true);
  });
  // stop() only stops a server already running: wait until it is, so that
  // the destructor never waits on a listener that missed its stop.
  while (!http.is_running()) {
    if (ended->load()) {
      return absl::UnavailableError(absl::StrCat(
          "--metrics-listen: the endpoint on ", address, " stopped at once"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() {
  http_->stop();
  if (listener_.joinable()) listener_.join();
}

}  // namespace gemm::server
