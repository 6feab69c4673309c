// The server gives back the memory a burst of large jobs left in malloc's
// heaps once it is quiet (issue 37, decision 56), at the trim threshold
// that keeps large jobs fast (1024 MiB). A real gemm-server (CPU backend,
// whose jobs' operands are heap blocks) under a real gemm-client load.
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "common/wait_until.h"
#include "gtest/gtest.h"
#include "tests/client_cli.h"
#include "tests/server_process.h"

namespace gemm {
namespace {

using testing::CliResult;
using testing::RunClient;
using testing::ServerProcess;
using testing::WaitUntil;

TEST(MemoryReleaseTest, AQuietServerGivesBackWhatABurstLeft) {
  ServerProcess server;
  ASSERT_TRUE(server.Start().ok());
  const double idle = server.StatusMiB("VmRSS");
  // 512^3 jobs (3 MiB of operands, 1 MiB of result each) on four
  // connections: gRPC's threads and the workers spread them over arenas.
  CliResult r = RunClient({"load", "-s", server.address(), "--shapes",
                           "512x512x512", "-c", "8", "--connections", "4",
                           "--count", "200", "--warmup-s", "0", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const double after_burst = server.StatusMiB("VmRSS");
  ASSERT_GT(after_burst - idle, 24) << "the burst should grow the heaps";
  // Quiet from now: within a few seconds (well before the 10 s malloc_trim,
  // which does not reach the threads' arenas' tops anyway) most of it goes.
  const double target = idle + 0.4 * (after_burst - idle);
  double now = after_burst;
  EXPECT_TRUE(WaitUntil(
      [&] {
        now = server.StatusMiB("VmRSS");
        return now <= target;
      },
      absl::Seconds(5), absl::Milliseconds(100)))
      << "idle " << idle << " MiB, after the burst " << after_burst
      << ", 5 s later " << now;
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace gemm
