// The metrics endpoint of a real gemm-server process, scraped over HTTP
// while and after a client runs jobs: the counts match what the client
// sent and got, and the text passes `promtool check metrics` (Debian's
// prometheus package, which bazelw installs).

#include <cstdio>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/lib/gemm_client.h"
#include "client/lib/shm_region.h"
#include "gtest/gtest.h"
#include "tests/metrics_scrape.h"
#include "tests/server_process.h"
#include "tests/test_job.h"

namespace gemm::testing {
namespace {

constexpr char kPromtool[] = "/usr/bin/promtool";

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_file_ = TempPath("metrics.port");
    std::remove(port_file_.c_str());
    server_ = std::make_unique<ServerProcess>(
        std::vector<std::string>{"--metrics-listen", "127.0.0.1:0",
                                 "--metrics-port-file", port_file_,
                                 "--testing-fail-kernel", "broken",
                                 "--testing-flip-m", "37"},
        ServerProcess::kServerWithFaults);
    ASSERT_TRUE(server_->Start().ok()) << server_->Log();
    std::ifstream(port_file_) >> metrics_port_;
    ASSERT_GT(metrics_port_, 0) << server_->Log();
  }

  std::string Scrape() {
    std::string text = ScrapeMetrics(metrics_port_);
    EXPECT_FALSE(text.empty()) << "scrape failed";
    return text;
  }

  std::string port_file_;
  std::unique_ptr<ServerProcess> server_;
  int metrics_port_ = 0;
};

TEST_F(MetricsTest, CountsMatchWhatTheClientSentAndPassPromtool) {
  client::GemmClient::Options options;
  options.target = server_->address();
  // Jobs over 40 KB go on a stream of their own: both calls are counted.
  options.max_unary_bytes = 40 << 10;
  auto client = client::GemmClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();

  // Odd shapes, unary (small) and streamed (larger); every result checked.
  std::vector<TestJob> jobs;
  uint64_t operand_bytes = 0, result_bytes = 0;
  for (int i = 0; i < 12; ++i) {
    const uint32_t m = i % 2 == 0 ? 33 : 131, n = 17 + i, k = 97;
    jobs.emplace_back(m, n, k, false, false, 1.0f, 0.0f, 7 + i);
    operand_bytes += 4ull * (m * k + k * n);
    result_bytes += 4ull * m * n;
  }
  std::vector<std::future<absl::StatusOr<v1::Timing>>> answers;
  for (TestJob& job : jobs) {
    answers.push_back((*client)->GemmFuture(job.args, job.out.data()));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_TRUE(answers[i].get().ok());
    EXPECT_LE(jobs[i].Error(), 1e-5);
  }
  ASSERT_TRUE((*client)->WouldSendUnary(jobs[0].args));
  ASSERT_FALSE((*client)->WouldSendUnary(jobs[1].args));
  // One refused (no such kernel), one failed on the device.
  TestJob unknown(8, 9, 10, false, false, 1.0f, 0.0f, 3, "no-such-kernel");
  EXPECT_EQ((*client)->Gemm(unknown.args, unknown.out.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
  TestJob broken(8, 9, 10, false, false, 1.0f, 0.0f, 4, "broken");
  EXPECT_EQ((*client)->Gemm(broken.args, broken.out.data()).status().code(),
            absl::StatusCode::kInternal);

  const std::string text = Scrape();
  EXPECT_EQ(MetricSample(text,
                         "gemm_jobs_total{outcome=\"ok\",code=\"OK\","
                         "kernel=\"cpu\",device=\"cpu\"}"),
            12)
      << text;
  EXPECT_EQ(MetricSample(text,
                         "gemm_jobs_total{outcome=\"rejected\","
                         "code=\"INVALID_ARGUMENT\",kernel=\"none\","
                         "device=\"none\"}"),
            1)
      << text;
  EXPECT_EQ(MetricSample(text,
                         "gemm_jobs_total{outcome=\"failed\",code=\"INTERNAL\","
                         "kernel=\"broken\""),
            1)
      << text;
  // Each delivered job's times are observed once, on its device.
  for (const char* phase : {"queue", "h2d", "compute", "d2h", "server"}) {
    EXPECT_EQ(MetricSample(text, absl::StrCat("gemm_job_", phase,
                                              "_seconds_count{device=\"cpu\"")),
              12)
        << phase;
  }
  EXPECT_EQ(MetricSample(text,
                         "gemm_job_compute_seconds_bucket{device=\"cpu\","
                         "kernel=\"cpu\",le=\"+Inf\"}"),
            12);
  // 13 batches ran: 12 ok (or fewer, batched together) and the broken one.
  EXPECT_EQ(MetricSample(text, "gemm_batch_size_sum{device=\"cpu\"}"), 12);
  EXPECT_EQ(MetricSample(text,
                         "gemm_batches_total{device=\"none\",kernel=\"broken\","
                         "outcome=\"failed\"}"),
            1)
      << text;
  // The messages carry the operands and results, plus their headers.
  EXPECT_GE(MetricSample(text, "gemm_received_bytes_total"), operand_bytes);
  EXPECT_LT(MetricSample(text, "gemm_received_bytes_total"),
            operand_bytes + 10000);
  EXPECT_GE(MetricSample(text, "gemm_sent_bytes_total"), result_bytes);
  EXPECT_LT(MetricSample(text, "gemm_sent_bytes_total"), result_bytes + 10000);
  // Gauges, with the limits from the flags' defaults.
  EXPECT_EQ(MetricSample(text, "gemm_queued_jobs "), 0);
  EXPECT_EQ(MetricSample(text, "gemm_queued_jobs_limit "), 1024);
  // A job's claim goes when gRPC lets go of its answer, which may be just
  // after the client has it.
  std::string settled = text;
  for (int i = 0; i < 100 && MetricSample(settled, "gemm_inflight_bytes ") != 0;
       ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    settled = Scrape();
  }
  EXPECT_EQ(MetricSample(settled, "gemm_inflight_bytes "), 0);
  EXPECT_EQ(MetricSample(text, "gemm_inflight_limit_bytes "), 8589934592.0);
  EXPECT_GE(MetricSample(text, "gemm_connections "), 1);
  EXPECT_GT(MetricSample(text, "process_resident_memory_bytes "), 1e6);
  EXPECT_NE(text.find("gemm_build_info{version=\""), std::string::npos);
  EXPECT_NE(text.find("backend=\"cpu\""), std::string::npos);

  // Info counts the same jobs.
  auto info = (*client)->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->stats().jobs_ok(), 12u);
  EXPECT_EQ(info->stats().jobs_rejected(), 1u);
  EXPECT_EQ(info->stats().jobs_failed(), 1u);

  const std::string file = TempPath("scrape.txt");
  std::ofstream(file) << text;
  const std::string command =
      absl::StrCat(kPromtool, " check metrics < ", file, " 2>&1");
  FILE* promtool = popen(command.c_str(), "r");
  ASSERT_NE(promtool, nullptr);
  std::string complaints;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), promtool) != nullptr) {
    complaints += buffer;
  }
  EXPECT_EQ(pclose(promtool), 0) << complaints;
  EXPECT_EQ(complaints, "");
}

// Checked jobs by result, the check's time, and each device's results that
// failed their check (a bit flipped in the first run of jobs with M = 37).
TEST_F(MetricsTest, RegionsAreCountedByKind) {
  client::GemmClient::Options options;
  options.target = server_->address();
  auto client = client::GemmClient::Create(options);
  ASSERT_TRUE(client.ok());
  auto shm = client::SharedMemoryRegion::Create(
      client::SharedMemoryRegion::UniqueKey("metrics"), 12288);
  ASSERT_TRUE(shm.ok());
  EXPECT_EQ(MetricSample(Scrape(), "gemm_regions{kind=\"system\"}"), 0);
  ASSERT_TRUE((*client)->RegisterRegion((*shm)->Describe("m")).ok());
  std::string text = Scrape();
  EXPECT_EQ(MetricSample(text, "gemm_regions{kind=\"system\"}"), 1) << text;
  EXPECT_EQ(MetricSample(text, "gemm_regions{kind=\"cuda-ipc\"}"), 0);
  EXPECT_EQ(MetricSample(text, "gemm_region_bytes{kind=\"system\"}"), 12288);
  EXPECT_GT(MetricSample(text, "gemm_region_limit_bytes "), 1e6);
  ASSERT_TRUE((*client)->UnregisterRegion("m").ok());
  text = Scrape();
  EXPECT_EQ(MetricSample(text, "gemm_regions{kind=\"system\"}"), 0);
  EXPECT_EQ(MetricSample(text, "gemm_region_bytes{kind=\"system\"}"), 0);
}

TEST_F(MetricsTest, ResultChecksAreCounted) {
  client::GemmClient::Options options;
  options.target = server_->address();
  auto client = client::GemmClient::Create(options);
  ASSERT_TRUE(client.ok());
  TestJob clean(40, 30, 20, false, false, 1.0f, 0.0f, 1);
  TestJob flipped(37, 30, 20, false, false, 1.0f, 0.0f, 2);
  TestJob unchecked(40, 30, 20, false, false, 1.0f, 0.0f, 3);
  clean.args.check = flipped.args.check = v1::CHECK_ABFT;
  for (TestJob* job : {&clean, &flipped, &unchecked}) {
    ASSERT_TRUE((*client)->Gemm(job->args, job->out.data()).ok());
    EXPECT_LE(job->Error(), 1e-5);
  }
  const std::string text = Scrape();
  EXPECT_EQ(MetricSample(text,
                         "gemm_checked_jobs_total{device=\"cpu\","
                         "result=\"passed\"}"),
            1)
      << text;
  EXPECT_EQ(MetricSample(text,
                         "gemm_checked_jobs_total{device=\"cpu\","
                         "result=\"recovered\"}"),
            1);
  EXPECT_EQ(MetricSample(text, "gemm_check_mismatches_total{device=\"cpu\"}"),
            1);
  EXPECT_EQ(MetricSample(text, "gemm_job_check_seconds_count{device=\"cpu\"}"),
            2);
  EXPECT_GT(MetricSample(text, "gemm_job_check_seconds_sum{device=\"cpu\"}"),
            0);
}

TEST_F(MetricsTest, OpenStreamsAreCounted) {
  // Streams kept open show up in the gauges.
  client::GemmClient::Options options;
  options.target = server_->address();
  auto client = client::GemmClient::Create(options);
  ASSERT_TRUE(client.ok());
  std::vector<std::unique_ptr<client::JobStream>> streams;
  TestJob job(64, 64, 64);
  for (int i = 0; i < 3; ++i) {
    streams.push_back((*client)->OpenStream());
    std::promise<absl::Status> answered;
    streams.back()->Submit(job.args, job.out.data(),
                           [&](absl::StatusOr<v1::Timing> timing) {
                             answered.set_value(timing.status());
                           });
    ASSERT_TRUE(answered.get_future().get().ok());
  }
  const std::string text = Scrape();
  EXPECT_EQ(MetricSample(text, "gemm_open_streams "), 3) << text;
  streams.clear();
}

}  // namespace
}  // namespace gemm::testing
