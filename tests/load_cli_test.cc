// `gemm-client load` as a script sees it (issue 37): the exit status says
// whether the run passed, the charts come from the binary alone, a shape
// mix has percentiles per shape, and a sweep prints a line per step. The
// real binary against a real gemm-server on a loopback port.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "tests/client_cli.h"
#include "tests/server_process.h"

namespace gemm {
namespace {

using testing::CliResult;
using testing::JsonNumber;
using testing::ReadFile;
using testing::RunClient;
using testing::ServerProcess;
using testing::TempPath;

// A loopback port nothing listens on: bound, never listened, then closed.
int ClosedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), len);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(LoadCliTest, ALoadAgainstAClosedPortFails) {
  // At 82891df: tens of thousands of UNAVAILABLE, a summary, exit 0.
  const std::string target = absl::StrCat("127.0.0.1:", ClosedPort());
  for (const char* allow : {"", "--allow-errors"}) {
    CliResult r = RunClient({"load", "-s", target, "-c", "4", "--duration-s",
                             "0.5", "--warmup-s", "0", "-q", allow});
    EXPECT_EQ(r.exit_code, 4) << allow << r.out << r.err;
    EXPECT_NE(r.err.find("load FAILED: no job succeeded"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("UNAVAILABLE"), std::string::npos) << r.err;
  }
}

TEST(LoadCliTest, RefusedConnectionsAreNamedWithTheirCause) {
  // At 82891df: 16 errors, "Streams reopened after breaking: 16", counts
  // that DISAGREE, exit 0, and nothing said why.
  ServerProcess server({"--max-client-connections", "2"});
  ASSERT_TRUE(server.Start().ok());
  CliResult r =
      RunClient({"load", "-s", server.address(), "--connections", "4", "-c",
                 "8", "--count", "200", "--warmup-s", "0", "-q"});
  EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
  EXPECT_NE(r.err.find("RESOURCE_EXHAUSTED"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--max-client-connections 2"), std::string::npos)
      << r.err;
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(LoadCliTest, DashNIsTheMatrixDimensionNotTheCount) {
  // -n is N in `run` and `kernels`; in `load` it was --count.
  CliResult r = RunClient({"load", "-s", "127.0.0.1:1", "-n", "5"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("-n"), std::string::npos) << r.err;
}

TEST(LoadCliTest, ShapeMixChartsAndSweep) {
  ServerProcess server;
  ASSERT_TRUE(server.Start().ok());
  const std::string prefix = TempPath("mix");
  CliResult r = RunClient({"load", "-s", server.address(), "--shapes",
                           "40x30x20:0.5,8x96x64:0.5", "-c", "4", "--count",
                           "300", "--warmup-s", "0", "-q", "--plot", prefix});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Percentiles per shape, in the text and the JSON (--plot writes it).
  EXPECT_NE(r.out.find("Per shape"), std::string::npos) << r.out;
  const std::string json = ReadFile(prefix + ".json");
  const size_t by_shape = json.find("\"latency_ms_by_shape\"");
  ASSERT_NE(by_shape, std::string::npos) << json;
  for (const char* shape : {"\"40x30x20\"", "\"8x96x64\""}) {
    const size_t at = json.find(shape, by_shape);
    ASSERT_NE(at, std::string::npos) << shape;
    EXPECT_GT(JsonNumber(json.substr(at), "p99"), 0) << shape;
  }
  // The charts, drawn by the binary with no Python.
  for (const char* chart : {"-latency.svg", "-throughput.svg"}) {
    const std::string svg = ReadFile(prefix + chart);
    EXPECT_EQ(svg.rfind("<svg ", 0), 0u) << chart;
    EXPECT_NE(svg.find("</svg>"), std::string::npos) << chart;
  }

  // A sweep over concurrency: a header and a line per step.
  const std::string sweep_json = TempPath("sweep.json");
  r = RunClient({"load", "-s", server.address(), "--shapes", "24x24x24",
                 "--concurrency-range", "1:5:2", "--count", "60", "--warmup-s",
                 "0", "-q", "--json", sweep_json});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("concurrency"), std::string::npos) << r.out;
  int lines = 0;
  for (const char* step :
       {"\n           1 ", "\n           3 ", "\n           5 "}) {
    lines += r.out.find(step) != std::string::npos;
  }
  EXPECT_EQ(lines, 3) << r.out;
  const std::string steps = ReadFile(sweep_json);
  EXPECT_NE(steps.find("\"sweep\": \"concurrency\""), std::string::npos);
  EXPECT_EQ(JsonNumber(steps, "concurrency"), 1) << steps;
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace gemm
