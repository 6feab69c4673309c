// End-to-end tests of the gemm-client CLI: the real binary, run as a
// subprocess, against a real gemm-server on a loopback port. They check the
// counts and status codes of `load` reports (text, JSON and CSV), and that
// `run` and `kernels` work.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/wait_until.h"
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
using testing::WaitUntil;

TEST(LoadTest, CountModeReportsExactlyTheCountWithNoErrors) {
  ServerProcess server;
  ASSERT_TRUE(server.Start().ok());
  const std::string json = TempPath("count.json");
  const std::string csv = TempPath("count.csv");
  CliResult r = RunClient({"load", "-s", server.address(), "--shapes",
                           "64x64x64:0.7,96x80x72:0.3", "-c", "8", "--count",
                           "200", "--warmup-s", "0.2", "--verify-every", "5",
                           "--json", json, "--csv", csv});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("count         200 (ok 200, errors 0)"),
            std::string::npos)
      << r.out;
  for (const char* field :
       {"requests/s", "GFLOP/s", "MB/s in", "MB/s out", "p99.9", "queued",
        "upload (h2d)", "compute", "download (d2h)"}) {
    EXPECT_NE(r.out.find(field), std::string::npos) << field;
  }
  const std::string report = ReadFile(json);
  EXPECT_EQ(JsonNumber(report, "count"), 200) << report;
  EXPECT_EQ(JsonNumber(report, "ok"), 200);
  EXPECT_EQ(JsonNumber(report, "errors"), 0);
  EXPECT_EQ(JsonNumber(report, "verify_failures"), 0);
  EXPECT_GT(JsonNumber(report, "verified"), 0);
  // The server's own counters saw every job, warm-up included.
  EXPECT_EQ(JsonNumber(report, "server_jobs_ok"),
            200 + JsonNumber(report, "warmup_jobs"))
      << report;
  EXPECT_EQ(JsonNumber(report, "server_jobs_failed"), 0);
  EXPECT_EQ(JsonNumber(report, "server_jobs_rejected"), 0);
  EXPECT_NE(r.out.find(": agree"), std::string::npos) << r.out;
  EXPECT_GT(JsonNumber(report, "requests_per_s"), 0);
  EXPECT_GT(JsonNumber(report, "p999"), 0);
  EXPECT_NE(report.find("\"errors_by_code\": {}"), std::string::npos);
  EXPECT_NE(report.find("\"64x64x64\": "), std::string::npos);
  EXPECT_NE(report.find("\"96x80x72\": "), std::string::npos);
  const std::string table = ReadFile(csv);
  ASSERT_EQ(std::count(table.begin(), table.end(), '\n'), 2) << table;
  EXPECT_NE(table.find("concurrency,1,8,0,closed-loop"), std::string::npos)
      << table;
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// Issue 11, defect 6: 32 streams each pipelining 200 jobs of 128^3 got
// 4,027 of 6,400 jobs back UNAVAILABLE. Streams are flow-controlled now:
// the server stops reading a stream while the queue or the in-flight
// budget is full, and every job runs, in memory bounded by the budget.
TEST(LoadTest, PipelinedStreamsAreSlowedDownNotTurnedAway) {
  // 6,400 jobs of 192 KiB: 1.2 GiB if all were read in at once. Without
  // BDP probing gRPC reads little ahead of what the server reads, so the
  // budget bounds the memory (with BDP probing, gRPC's windows do).
  ServerProcess server({"--max-inflight-bytes", "268435456", "--max-job-bytes",
                        "67108864", "--http2-bdp-probe", "false"});
  ASSERT_TRUE(server.Start().ok());
  const std::string json = TempPath("pipelined.json");
  CliResult r = RunClient({"load",
                           "-s",
                           server.address(),
                           "--shapes",
                           "128x128x128",
                           "--connections",
                           "4",
                           "--streams-per-connection",
                           "8",
                           "-c",
                           "6400",
                           "--count",
                           "6400",
                           "--warmup-s",
                           "0",
                           "--verify-every",
                           "64",
                           "-q",
                           "--json",
                           json});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string report = ReadFile(json);
  EXPECT_EQ(JsonNumber(report, "ok"), 6400) << report;
  EXPECT_EQ(JsonNumber(report, "errors"), 0) << report;
  EXPECT_EQ(JsonNumber(report, "verify_failures"), 0);
  EXPECT_GT(JsonNumber(report, "verified"), 0);
  EXPECT_EQ(JsonNumber(report, "server_jobs_rejected"), 0) << report;
  const double peak = server.StatusMiB("VmHWM");
  EXPECT_GT(peak, 0);
  EXPECT_LT(peak, 512) << "the budget is 256 MiB; all jobs are 1.2 GiB";
  std::printf("server peak RSS %.0f MiB\n", peak);
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(LoadTest, FailedJobsAreCountedByCodeAndAddUp) {
  ServerProcess server({"--testing-fail-kernel", "broken"},
                       ServerProcess::kServerWithFaults);
  ASSERT_TRUE(server.Start().ok());
  const std::string json = TempPath("failed.json");
  CliResult r =
      RunClient({"load", "-s", server.address(), "--shapes", "24x16x8",
                 "--kernel", "broken", "-c", "16", "--count", "300",
                 "--warmup-s", "0", "-q", "--json", json});
  // The report is written; the run fails, as no job succeeded.
  ASSERT_EQ(r.exit_code, 4) << r.out;
  EXPECT_NE(r.err.find("no job succeeded: 300 failed: INTERNAL 300"),
            std::string::npos)
      << r.err;
  const std::string report = ReadFile(json);
  EXPECT_EQ(JsonNumber(report, "count"), 300) << report;
  EXPECT_EQ(JsonNumber(report, "ok"), 0);
  EXPECT_EQ(JsonNumber(report, "errors"), 300);
  EXPECT_EQ(JsonNumber(report, "INTERNAL"), 300) << report;
  EXPECT_EQ(JsonNumber(report, "server_jobs_failed"), 300) << report;
  EXPECT_NE(r.out.find("INTERNAL"), std::string::npos);
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(LoadTest, PoissonRateModeRunsForTheDuration) {
  ServerProcess server;
  ASSERT_TRUE(server.Start().ok());
  const std::string json = TempPath("rate.json");
  CliResult r =
      RunClient({"load", "-s", server.address(), "--shapes", "32x32x32", "-r",
                 "200", "--arrivals", "poisson", "-d", "1.5", "--warmup-s",
                 "0.3", "--connections", "2", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string report = ReadFile(json);
  EXPECT_NE(report.find("\"arrivals\": \"poisson\""), std::string::npos);
  EXPECT_EQ(JsonNumber(report, "connections"), 2);
  // About 300 jobs; Poisson noise is far inside these bounds.
  EXPECT_GT(JsonNumber(report, "count"), 180) << report;
  EXPECT_LT(JsonNumber(report, "count"), 450) << report;
  EXPECT_EQ(JsonNumber(report, "errors"), 0);
  EXPECT_GT(JsonNumber(report, "warmup_jobs"), 0);
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(LoadTest, ParallelDispatchersKeepTheCountsExact) {
  ServerProcess server;
  ASSERT_TRUE(server.Start().ok());
  // 3 connections and a cap of 7: three dispatchers with caps 3, 2, 2; a
  // count that no share divides evenly.
  const std::string json = TempPath("parallel.json");
  CliResult r =
      RunClient({"load", "-s", server.address(), "--shapes", "48x40x32", "-c",
                 "7", "--connections", "3", "--count", "301", "--warmup-s",
                 "0.2", "--verify-every", "7", "-q", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string report = ReadFile(json);
  EXPECT_EQ(JsonNumber(report, "connections"), 3) << report;
  EXPECT_EQ(JsonNumber(report, "count"), 301) << report;
  EXPECT_EQ(JsonNumber(report, "ok"), 301);
  EXPECT_EQ(JsonNumber(report, "verify_failures"), 0);
  EXPECT_GT(JsonNumber(report, "verified"), 0);
  EXPECT_EQ(JsonNumber(report, "server_jobs_ok"),
            301 + JsonNumber(report, "warmup_jobs"))
      << report;

  // Constant-rate arrivals split over 4 dispatchers still add up to the
  // rate: 400/s for 1 s.
  const std::string rate_json = TempPath("parallel-rate.json");
  r = RunClient({"load", "-s", server.address(), "--shapes", "32x32x32", "-r",
                 "400", "-d", "1", "--warmup-s", "0.2", "--connections", "4",
                 "-q", "--json", rate_json});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string rated = ReadFile(rate_json);
  EXPECT_GT(JsonNumber(rated, "count"), 360) << rated;
  EXPECT_LT(JsonNumber(rated, "count"), 440) << rated;
  EXPECT_EQ(JsonNumber(rated, "errors"), 0);
  EXPECT_EQ(JsonNumber(rated, "server_jobs_ok"),
            JsonNumber(rated, "count") + JsonNumber(rated, "warmup_jobs"))
      << rated;
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(LoadTest, SeveralStreamsPerConnectionAndSplitJobsVerify) {
  ServerProcess server;
  ASSERT_TRUE(server.Start().ok());
  // 2 connections x 3 streams; jobs of 60 rows split in 4 row blocks, so
  // the server runs 4 jobs for each one the client counts.
  const std::string json = TempPath("streams-split.json");
  CliResult r = RunClient({"load",
                           "-s",
                           server.address(),
                           "--shapes",
                           "60x50x40",
                           "-c",
                           "5",
                           "--connections",
                           "2",
                           "--streams-per-connection",
                           "3",
                           "--split",
                           "4",
                           "--split-min-bytes",
                           "1",
                           "--count",
                           "120",
                           "--warmup-s",
                           "0.2",
                           "--verify-every",
                           "3",
                           "-q",
                           "--json",
                           json});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string report = ReadFile(json);
  EXPECT_EQ(JsonNumber(report, "connections"), 2) << report;
  EXPECT_EQ(JsonNumber(report, "streams"), 6) << report;
  EXPECT_EQ(JsonNumber(report, "ok"), 120);
  EXPECT_EQ(JsonNumber(report, "verify_failures"), 0);
  EXPECT_GT(JsonNumber(report, "verified"), 0);
  EXPECT_EQ(JsonNumber(report, "server_jobs_ok"),
            4 * (120 + JsonNumber(report, "warmup_jobs")))
      << report;
  EXPECT_EQ(JsonNumber(report, "server_side_jobs"),
            JsonNumber(report, "server_jobs_ok"));
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(LoadTest, UnaryShareMixesTheCallsAndEveryResultIsChecked) {
  ServerProcess server;
  ASSERT_TRUE(server.Start().ok());
  // 20011x14x41's A (3.3 MB) is over both the 3 MiB unary limit and the
  // 1 MiB of a whole stream message, and its C (1.1 MB) over the 1 MiB of
  // an inline result: on the streams it goes in chunks both ways, and with
  // --unary-share on a GemmStream call of its own.
  const std::string json = TempPath("unary-share.json");
  CliResult r = RunClient({"load",
                           "-s",
                           server.address(),
                           "--shapes",
                           "33x17x9:0.4,64x64x64:0.35,20011x14x41:0.25",
                           "-c",
                           "6",
                           "--connections",
                           "2",
                           "--unary-share",
                           "0.5",
                           "--count",
                           "80",
                           "--warmup-s",
                           "0",
                           "--verify-every",
                           "1",
                           "-q",
                           "--json",
                           json});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string report = ReadFile(json);
  const double sent = JsonNumber(report, "sent");
  EXPECT_EQ(sent, 80) << report;
  EXPECT_EQ(JsonNumber(report, "answered_ok"), sent);
  EXPECT_EQ(JsonNumber(report, "answered_errors"), 0);
  EXPECT_GT(JsonNumber(report, "stream"), 0) << report;
  EXPECT_GT(JsonNumber(report, "unary"), 0) << report;
  EXPECT_GT(JsonNumber(report, "own_stream"), 0) << report;
  EXPECT_EQ(JsonNumber(report, "split"), 0) << report;
  EXPECT_EQ(JsonNumber(report, "verified"), sent);
  EXPECT_EQ(JsonNumber(report, "verify_failures"), 0);
  EXPECT_EQ(JsonNumber(report, "server_jobs_ok"), sent) << report;
  EXPECT_NE(report.find("\"server_counts_agree\": true"), std::string::npos)
      << report;
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(RunCommandTest, RunVerifiesAndWritesNpy) {
  ServerProcess server;
  ASSERT_TRUE(server.Start().ok());
  const std::string out = TempPath("c.npy");
  CliResult r =
      RunClient({"run", "-s", server.address(), "-m", "100", "-n", "90", "-k",
                 "80", "--verify", "--repeat", "2", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("run 2:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vs float64 OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("compute"), std::string::npos);
  EXPECT_EQ(ReadFile(out).substr(1, 5), "NUMPY");
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(RunCommandTest, RunThroughASharedMemoryRegionVerifies) {
  ServerProcess server;
  ASSERT_TRUE(server.Start().ok());
  const std::string out = TempPath("c-shm.npy");
  CliResult r =
      RunClient({"run", "-s", server.address(), "-m", "70", "-n", "50", "-k",
                 "30", "--beta", "0.5", "--trans-b", "--memory", "shm",
                 "--verify", "--repeat", "2", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("operands and result in shm region"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("run 2:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vs float64 OK"), std::string::npos) << r.out;
  EXPECT_EQ(ReadFile(out).substr(1, 5), "NUMPY");
  // CUDA IPC needs a CUDA server: the CPU backend says so.
  r = RunClient({"run", "-s", server.address(), "-m", "8", "-n", "8", "-k", "8",
                 "--memory", "cuda-ipc"});
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST(KernelsCommandTest, TheCpuBackendHasOneRow) {
  ServerProcess server;
  ASSERT_TRUE(server.Start().ok());
  const std::string json = TempPath("kernels.json");
  CliResult r = RunClient({"kernels", "-s", server.address(), "-m", "64", "-n",
                           "64", "-k", "64", "--verify", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("% of best"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| cpu | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 100.0 |"), std::string::npos) << r.out;
  const std::string table = ReadFile(json);
  EXPECT_EQ(JsonNumber(table, "m"), 64) << table;
  EXPECT_NE(table.find("\"base\": \"best\""), std::string::npos) << table;
  EXPECT_NE(table.find("\"kernel\": \"cpu\""), std::string::npos) << table;
  EXPECT_NEAR(JsonNumber(table, "percent_of_base"), 100, 1e-9) << table;
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

// A probe's view (issue 13: the image has no other probe tool): exit status
// 0 only while the server is SERVING.
TEST(HealthCommandTest, ExitsZeroOnlyWhileServing) {
  ServerProcess server({"--drain-delay-s", "3"});
  ASSERT_TRUE(server.Start().ok());
  CliResult r = RunClient({"health", "-s", server.address()});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "SERVING\n");
  r = RunClient(
      {"health", "-s", server.address(), "--service", "gemm.v1.GemmService"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = RunClient({"health", "-s", server.address(), "--service", "nope"});
  EXPECT_EQ(r.exit_code, 1) << "an unknown service";
  server.Signal(SIGTERM);
  // The drain begins as the signal is handled; the drain delay (3 s) is the
  // window in which the probe must say so.
  WaitUntil(
      [&] {
        r = RunClient({"health", "-s", server.address()});
        return r.exit_code == 1;
      },
      absl::Seconds(3), absl::Milliseconds(50));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "NOT_SERVING\n") << "during the drain delay";
  EXPECT_EQ(server.Wait(15), 0);
}

}  // namespace
}  // namespace gemm
