// A GPU that fails for real: gemm-server-with-faults --backend cuda
// --testing-fault-device-kernel v2 faults the device (a kernel writing to an
// invalid address, tests/device_fault.h) before a v2 batch runs. The job
// must end with INTERNAL naming the device, never with a result; Info must
// show the device failed; health must turn NOT_SERVING; and with no device
// left the server must stop by itself with exit status 3. Skips only where
// the host has no CUDA device.
//
// Outside Bazel: GEMM_SERVER_WITH_FAULTS_BINARY=path/to/gemm-server-with-faults
#include <signal.h>

#include <cmath>
#include <string>

#include "absl/time/clock.h"
#include "client/lib/gemm_client.h"
#include "gtest/gtest.h"
#include "kernels/cuda_presence.h"
#include "tests/server_process.h"
#include "tests/test_job.h"

namespace gemm {
namespace {

using client::GemmClient;
using testing::ServerProcess;
using testing::TestJob;

TEST(GpuFaultTest, AFaultedDeviceIsTakenOutAndTheServerStops) {
  const absl::StatusOr<kernels::CudaPresence> gpu = kernels::ProbeCudaDevices();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  if (!gpu->present) GTEST_SKIP() << gpu->why_absent;

  ServerProcess server({"--backend", "cuda", "--testing-fault-device-kernel",
                        "v2", "--drain-delay-s", "3", "--shutdown-grace-s",
                        "10", "--log-level", "info"},
                       ServerProcess::kServerWithFaults);
  ASSERT_TRUE(server.Start().ok()) << server.Log();
  GemmClient::Options options;
  options.target = server.address();
  auto client = GemmClient::Create(options);
  ASSERT_TRUE(client.ok());

  // Healthy first: a verified job on the GPU.
  TestJob before(257, 129, 511, false, false, 1.0f, 0.0f, 5, "v6");
  ASSERT_TRUE((*client)->Gemm(before.args, before.out.data()).ok());
  EXPECT_LE(before.Error(), 1e-5);
  ASSERT_EQ((*client)->Health().value_or("?"), "SERVING");

  // The faulted batch: INTERNAL naming the device and the error, and C is
  // left as it was (poisoned), never filled from the failed device.
  TestJob faulted(64, 64, 64, false, false, 1.0f, 0.0f, 6, "v2");
  const auto status =
      (*client)->Gemm(faulted.args, faulted.out.data()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_NE(status.message().find("cuda:0"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("out of service"), absl::string_view::npos)
      << status;
  EXPECT_TRUE(std::isnan(faulted.out[0]));

  // During the drain: health says NOT_SERVING, Info says why, and no job
  // is computed any more.
  EXPECT_EQ((*client)->Health().value_or("?"), "NOT_SERVING");
  auto info = (*client)->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_GE(info->devices_size(), 1);
  EXPECT_EQ(
      info->devices(0).state().rfind("failed: cudaErrorIllegalAddress", 0), 0u)
      << info->devices(0).state();
  TestJob after(32, 32, 32, false, false, 1.0f, 0.0f, 7, "v6");
  EXPECT_EQ((*client)->Gemm(after.args, after.out.data()).status().code(),
            absl::StatusCode::kUnavailable);

  // It stops by itself, non-zero, so that its supervisor restarts it.
  EXPECT_EQ(server.Wait(20), 3) << server.Log();
  EXPECT_NE(server.Log().find("every device failed"), std::string::npos)
      << server.Log();
}

}  // namespace
}  // namespace gemm
