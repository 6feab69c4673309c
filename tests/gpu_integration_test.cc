// End-to-end on a GPU: a real gemm-server with --backend cuda, driven
// through libgemm_client. Batched and unbatched jobs, mixed shapes, every
// named kernel and "auto", each compared with a float64 reference. Skips
// (with the reason) only where the host has no CUDA device, decided here in
// the test process before the server starts; any other CUDA error fails
// (kernels/cuda_presence.h).
//
// Outside Bazel: GEMM_SERVER_BINARY=path/to/gemm-server gpu_integration_test
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <thread>

#include "absl/time/time.h"
#include "client/lib/gemm_client.h"
#include "common/reference_gemm.h"
#include "common/wait_until.h"
#include "gtest/gtest.h"
#include "kernels/cuda_presence.h"
#include "tests/metrics_scrape.h"
#include "tests/server_process.h"
#include "tests/test_job.h"

namespace gemm {
namespace {

using client::GemmArgs;
using client::GemmClient;
using testing::ServerProcess;
using testing::TestJob;

constexpr double kTolerance = 1e-5;

class GpuIntegrationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    gpu_ =
        new absl::StatusOr<kernels::CudaPresence>(kernels::ProbeCudaDevices());
    if (!gpu_->ok() || !(*gpu_)->present) return;
    // A queue delay long enough for a burst of jobs to form one batch.
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string port_file =
        std::string(tmp != nullptr ? tmp : "/tmp") + "/gpu-metrics.port";
    std::remove(port_file.c_str());
    server_ =
        new ServerProcess({"--backend", "cuda", "--max-batch-size", "32",
                           "--max-queue-delay-us", "20000", "--metrics-listen",
                           "127.0.0.1:0", "--metrics-port-file", port_file});
    ASSERT_TRUE(server_->Start().ok());
    std::ifstream(port_file) >> metrics_port_;
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) {
      EXPECT_EQ(server_->Stop(SIGTERM), 0);
      delete server_;
      server_ = nullptr;
    }
    delete gpu_;
    gpu_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(gpu_->ok()) << gpu_->status();
    if (!(*gpu_)->present) GTEST_SKIP() << (*gpu_)->why_absent;
    ASSERT_NE(server_, nullptr);
    GemmClient::Options options;
    options.target = server_->address();
    auto client = GemmClient::Create(options);
    ASSERT_TRUE(client.ok());
    client_ = std::move(*client);
  }

  // Sends `jobs` pipelined on one stream; returns each job's timing.
  std::vector<v1::Timing> RunAll(std::vector<std::unique_ptr<TestJob>>& jobs) {
    std::vector<v1::Timing> timings(jobs.size());
    std::vector<absl::Status> statuses(jobs.size());
    auto stream = client_->OpenStream();
    for (size_t i = 0; i < jobs.size(); ++i) {
      stream->Submit(jobs[i]->args, jobs[i]->out.data(),
                     [&, i](absl::StatusOr<v1::Timing> t) {
                       statuses[i] = t.status();
                       if (t.ok()) timings[i] = *t;
                     });
    }
    EXPECT_TRUE(stream->Finish().ok());
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i];
      EXPECT_LE(jobs[i]->Error(), kTolerance)
          << "job " << i << " kernel " << timings[i].kernel();
      EXPECT_EQ(timings[i].device().rfind("cuda:", 0), 0u);
    }
    return timings;
  }

  static absl::StatusOr<kernels::CudaPresence>* gpu_;
  static ServerProcess* server_;
  static int metrics_port_;
  std::unique_ptr<GemmClient> client_;
};
absl::StatusOr<kernels::CudaPresence>* GpuIntegrationTest::gpu_ = nullptr;
ServerProcess* GpuIntegrationTest::server_ = nullptr;
int GpuIntegrationTest::metrics_port_ = 0;

TEST_F(GpuIntegrationTest, InfoDescribesTheGpu) {
  auto info = client_->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->backend(), "cuda");
  ASSERT_GE(info->devices_size(), 1);
  EXPECT_EQ(info->devices(0).id(), "cuda:0");
  EXPECT_GT(info->devices(0).memory_bytes(), 0u);
  EXPECT_FALSE(info->devices(0).compute_capability().empty());
  std::vector<std::string> kernels(info->kernels().begin(),
                                   info->kernels().end());
  for (const char* k : {"v0", "v1", "v2", "v3", "v4", "v5", "cublas"}) {
    EXPECT_NE(std::find(kernels.begin(), kernels.end(), k), kernels.end()) << k;
  }
}

TEST_F(GpuIntegrationTest, EveryKernelUnbatchedOnOddShapes) {
  for (const char* kernel :
       {"auto", "v0", "v1", "v2", "v3", "v4", "v5", "cublas"}) {
    for (int i = 0; i < 3; ++i) {
      TestJob job(67 + i * 100, 45 + i * 77, 33 + i * 50, i == 1, i == 2, 1.25f,
                  i == 0 ? 0.0f : 0.5f, 7 * i + 1, kernel);
      auto timing = client_->Gemm(job.args, job.out.data());
      ASSERT_TRUE(timing.ok()) << kernel << ": " << timing.status();
      EXPECT_LE(job.Error(), kTolerance) << kernel;
      if (std::string(kernel) != "auto") {
        EXPECT_EQ(timing->kernel(), kernel);
      }
      // Any GPU of the host may run it (jobs spread over all of them).
      EXPECT_EQ(timing->device().rfind("cuda:", 0), 0u) << timing->device();
      EXPECT_GE(timing->server_ms(), timing->compute_ms());
    }
  }
}

// TF32 and BF16 only when asked for: auto then runs cuBLAS's Tensor Core
// entry, the timing says so, the error is what the rounding allows, and
// the result check (with the precision's tolerance) passes. Float32 stays
// the default; a job that asks for the float32-accurate mode gets float32
// or 3xTF32, whichever auto found the faster for its shape.
TEST_F(GpuIntegrationTest, PrecisionIsTheCallersChoice) {
  auto info = client_->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  std::map<std::string, std::string> precision_of;
  for (const auto& k : info->kernel_details())
    precision_of[k.name()] = k.precision();
  EXPECT_EQ(precision_of["cublas"], "fp32");
  EXPECT_EQ(precision_of["v6"], "fp32");
  EXPECT_EQ(precision_of["cublas-tf32"], "tf32");
  EXPECT_EQ(precision_of["cublas-bf16"], "bf16");
  EXPECT_EQ(precision_of["v9"], "fp32-tensor");
  EXPECT_EQ(precision_of["v12"], "fp32-tensor");
  // v12 (wgmma) runs only on compute capability 9.0.
  bool hopper = !info->devices().empty();
  for (const auto& device : info->devices()) {
    hopper = hopper && device.compute_capability() == "9.0";
  }
  struct Case {
    v1::Precision precision;
    const char* kernel;
    const char* name;
    double tolerance;
  };
  for (const Case& c :
       {Case{v1::PRECISION_DEFAULT, "", "fp32", kTolerance},
        Case{v1::PRECISION_FP32_TENSOR, "", "", kTolerance},
        Case{v1::PRECISION_FP32_TENSOR, "v9", "fp32-tensor", kTolerance},
        Case{v1::PRECISION_FP32_TENSOR, "v12", "fp32-tensor", kTolerance},
        Case{v1::PRECISION_TF32, "cublas-tf32", "tf32", 5e-3},
        Case{v1::PRECISION_BF16, "cublas-bf16", "bf16", 3e-2}}) {
    if (std::string(c.kernel) == "v12" && !hopper) continue;
    for (bool trans : {false, true}) {
      TestJob job(333, 257, 1001, trans, !trans, 1.0f, trans ? 0.5f : 0.0f, 9);
      job.args.precision = c.precision;
      if (*c.kernel != 0) job.args.kernel = c.kernel;
      job.args.check = v1::CHECK_ABFT;
      auto timing = client_->Gemm(job.args, job.out.data());
      ASSERT_TRUE(timing.ok()) << c.name << ": " << timing.status();
      if (*c.name != 0) {
        EXPECT_EQ(timing->precision(), c.name);
      } else {
        EXPECT_TRUE(timing->precision() == "fp32" ||
                    timing->precision() == "fp32-tensor")
            << timing->precision();
      }
      if (*c.kernel != 0) {
        EXPECT_EQ(timing->kernel(), c.kernel);
      }
      EXPECT_LE(job.Error(), c.tolerance) << c.name;
      EXPECT_TRUE(timing->check().ran());
      EXPECT_EQ(timing->check().mismatches(), 0u) << timing->check().detail();
      EXPECT_LE(timing->check().worst_ratio(), 1.0);
      if (c.precision == v1::PRECISION_TF32) {
        // Rounded inputs: off by more than float32 would be.
        EXPECT_GT(job.Error(), 1e-5);
      }
    }
  }
  // A kernel of another precision is refused, naming both; so is the
  // Tensor Core kernel for a job that did not opt in.
  for (const char* kernel : {"cublas-tf32", "v9", "v12"}) {
    TestJob mismatch(64, 64, 64, false, false, 1.0f, 0.0f, 10, kernel);
    auto refused = client_->Gemm(mismatch.args, mismatch.out.data());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
        << kernel;
    EXPECT_NE(refused.status().message().find(precision_of[kernel]),
              std::string::npos)
        << refused.status();
  }
}

TEST_F(GpuIntegrationTest, SameShapeJobsRunAsOneBatchedLaunch) {
  for (const char* kernel : {"v5", "cublas"}) {
    std::vector<std::unique_ptr<TestJob>> jobs;
    for (int i = 0; i < 24; ++i) {
      jobs.push_back(std::make_unique<TestJob>(128, 96, 80, false, false, 1.0f,
                                               0.0f, 500 + i, kernel));
    }
    auto timings = RunAll(jobs);
    uint32_t largest = 0;
    for (const auto& t : timings) largest = std::max(largest, t.batch_size());
    EXPECT_GT(largest, 1u) << kernel << ": no job ran batched";
  }
}

TEST_F(GpuIntegrationTest, MixedShapesRunBackToBack) {
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 30; ++i) {
    const uint32_t m = (i % 3 == 0) ? 64 : 33 + i;
    jobs.push_back(std::make_unique<TestJob>(
        m, 40 + (i % 2) * 9, 17 + (i % 4), i % 2 == 1, false, 1.0f,
        (i % 5 == 0) ? 0.5f : 0.0f, 1000 + i, i % 2 ? "v5" : "auto"));
  }
  RunAll(jobs);
}

TEST_F(GpuIntegrationTest, LargeJobOverTheStream) {
  std::vector<std::unique_ptr<TestJob>> jobs;
  jobs.push_back(std::make_unique<TestJob>(1100, 1000, 900, false, true, 1.0f,
                                           0.5f, 3, "auto"));
  RunAll(jobs);
}

}  // namespace
}  // namespace gemm

namespace gemm {
namespace {

// The metrics of a CUDA server: jobs counted on the GPU, with copy times,
// and the device and pinned pools that the jobs filled.
TEST_F(GpuIntegrationTest, MetricsCountTheGpuJobsAndItsMemory) {
  ASSERT_GT(metrics_port_, 0);
  const std::string before = testing::ScrapeMetrics(metrics_port_);
  ASSERT_FALSE(before.empty());
  const std::string ok_series =
      "gemm_jobs_total{outcome=\"ok\",code=\"OK\",kernel=\"cublas\","
      "device=\"cuda:0\"}";
  const double ok_before =
      std::max(0.0, testing::MetricSample(before, ok_series));
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(std::make_unique<TestJob>(257, 129, 511, false, false, 1.0f,
                                             0.0f, 50 + i, "cublas"));
  }
  RunAll(jobs);
  const std::string text = testing::ScrapeMetrics(metrics_port_);
  EXPECT_EQ(testing::MetricSample(text, ok_series), ok_before + 6) << text;
  EXPECT_GT(testing::MetricSample(
                text, "gemm_job_h2d_seconds_sum{device=\"cuda:0\"}"),
            0);
  EXPECT_GT(testing::MetricSample(
                text, "gemm_job_d2h_seconds_sum{device=\"cuda:0\"}"),
            0);
  EXPECT_GT(testing::MetricSample(
                text, "gemm_device_memory_budget_bytes{device=\"cuda:0\"}"),
            0);
  // Operand blocks stay cached once the batches are done.
  EXPECT_GT(testing::MetricSample(
                text, "gemm_device_memory_cached_bytes{device=\"cuda:0\"}"),
            0);
  EXPECT_EQ(testing::MetricSample(
                text, "gemm_device_memory_used_bytes{device=\"cuda:0\"}"),
            0);
  // The pinned pool, pinned at start, is whole again once the jobs end
  // (a job's blocks go back when the server lets go of its call).
  EXPECT_GT(testing::MetricSample(text, "gemm_pinned_host_pool_bytes "), 0);
  double pinned_used = -1;
  testing::WaitUntil(
      [&] {
        pinned_used =
            testing::MetricSample(testing::ScrapeMetrics(metrics_port_),
                                  "gemm_pinned_host_used_bytes ");
        return pinned_used == 0;
      },
      absl::Seconds(5), absl::Milliseconds(100));
  EXPECT_EQ(pinned_used, 0);
  EXPECT_GT(testing::MetricSample(
                text, "gemm_device_memory_total_bytes{device=\"cuda:0\""),
            1e9);
  EXPECT_NE(text.find("backend=\"cuda\""), std::string::npos);
}

}  // namespace
}  // namespace gemm
