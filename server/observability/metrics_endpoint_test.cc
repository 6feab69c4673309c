#include "server/observability/metrics_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace gemm::server {
namespace {

// Sends `request` to 127.0.0.1:`port` and returns all that comes back
// (the endpoint closes the connection after each answer).
std::string Exchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    close(fd);
    return "connect failed";
  }
  (void)!write(fd, request.data(), request.size());
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  return response;
}

std::string Request(const std::string& method, const std::string& path) {
  return absl::StrCat(method, " ", path,
                      " HTTP/1.1\r\nHost: localhost\r\nConnection: "
                      "close\r\nContent-Length: 0\r\n\r\n");
}

TEST(MetricsEndpointTest, ServesTheRenderedTextAtMetrics) {
  std::atomic<int> renders{0};
  auto endpoint = MetricsEndpoint::Start("127.0.0.1:0", [&] {
    return absl::StrCat("demo_scrapes_total ", ++renders, "\n");
  });
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  ASSERT_GT((*endpoint)->port(), 0);

  const std::string first =
      Exchange((*endpoint)->port(), Request("GET", "/metrics"));
  EXPECT_EQ(first.rfind("HTTP/1.1 200", 0), 0u) << first;
  EXPECT_NE(first.find("Content-Type: text/plain; version=0.0.4"),
            std::string::npos)
      << first;
  EXPECT_NE(first.find("\r\n\r\ndemo_scrapes_total 1\n"), std::string::npos)
      << first;
  // Rendered anew for each scrape.
  const std::string second =
      Exchange((*endpoint)->port(), Request("GET", "/metrics"));
  EXPECT_NE(second.find("demo_scrapes_total 2\n"), std::string::npos);
}

TEST(MetricsEndpointTest, AnswersOtherPathsAndMethodsWithErrors) {
  auto endpoint = MetricsEndpoint::Start("localhost:0",
                                         [] { return std::string("x 1\n"); });
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const int port = (*endpoint)->port();
  EXPECT_EQ(Exchange(port, Request("GET", "/")).rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(
      Exchange(port, Request("GET", "/metricsx")).rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(
      Exchange(port, Request("POST", "/metrics")).rfind("HTTP/1.1 405", 0), 0u);
  const std::string head = Exchange(port, Request("HEAD", "/metrics"));
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_EQ(head.find("x 1"), std::string::npos) << head;
}

TEST(MetricsEndpointTest, RefusesAddressesItCannotUse) {
  auto render = [] { return std::string(); };
  for (const char* bad :
       {"9464", ":9464", "127.0.0.1:port", "127.0.0.1:70000"}) {
    auto endpoint = MetricsEndpoint::Start(bad, render);
    EXPECT_EQ(endpoint.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_NE(endpoint.status().message().find("--metrics-listen"),
              std::string::npos)
        << endpoint.status();
  }
  auto taken = MetricsEndpoint::Start("127.0.0.1:0", render);
  ASSERT_TRUE(taken.ok());
  auto second = MetricsEndpoint::Start(
      absl::StrCat("127.0.0.1:", (*taken)->port()), render);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("cannot serve metrics"),
            std::string::npos)
      << second.status();
}

}  // namespace
}  // namespace gemm::server
