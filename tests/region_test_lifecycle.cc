// Shared-memory regions end to end (the suite: region_test.cc, fixture
// tests/region_test_fixture.h): registration checked at once, read-only
// regions, callers that cannot see each other's regions, Unregister waiting
// for the job that uses the region, the region of a caller that exited
// unmapped when idle, a truncated object; and on the GPU build CUDA IPC
// regions (on the CPU backend they are refused).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/lib/gemm_client.h"
#include "client/lib/shm_region.h"
#include "common/wait_until.h"
#include "gtest/gtest.h"
#include "tests/region_test_fixture.h"
#ifdef GEMM_REGION_TEST_ON_GPU
#include <cuda_runtime_api.h>

#include "client/lib/cuda_ipc_region.h"
#endif

namespace gemm::region_test {
namespace {

using testing::WaitUntil;

TEST_F(RegionTest, RegistrationIsCheckedAtOnce) {
  auto client = Connect(server_->address());
  auto shm =
      SharedMemoryRegion::Create(SharedMemoryRegion::UniqueKey("reg"), 8192);
  ASSERT_TRUE(shm.ok());
  // An object of another program, and a FIFO, both where the server could
  // open them.
  static const std::string foreign = "/other-" + std::to_string(getpid());
  static const std::string fifo = "/gemm-fifo-" + std::to_string(getpid());
  static const char* kForeignKey = foreign.c_str();
  static const char* kFifoKey = fifo.c_str();
  const int fd = shm_open(kForeignKey, O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 8192), 0);
  close(fd);
  ASSERT_EQ(mkfifo(("/dev/shm" + fifo).c_str(), 0600), 0);
  struct Cleanup {
    ~Cleanup() {
      shm_unlink(foreign.c_str());
      unlink(("/dev/shm" + fifo).c_str());
    }
  } cleanup;
  struct Case {
    std::string what;
    std::function<void(v1::RegisterRegionRequest&)> change;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"no such object",
       [](v1::RegisterRegionRequest& r) {
         r.mutable_system()->set_key("/gemm-no-such-object");
       },
       absl::StatusCode::kNotFound, "no such object on the server's host"},
      {"past the object's end",
       [](v1::RegisterRegionRequest& r) {
         r.mutable_system()->set_offset(4096);
       },
       absl::StatusCode::kInvalidArgument, "which has 8192 bytes"},
      {"not a shm name",
       [](v1::RegisterRegionRequest& r) {
         r.mutable_system()->set_key("../etc/passwd");
       },
       absl::StatusCode::kInvalidArgument, "not a POSIX shared-memory name"},
      {"another host",
       [](v1::RegisterRegionRequest& r) { r.set_host_id("elsewhere"); },
       absl::StatusCode::kFailedPrecondition, "runs on another host"},
      {"no name", [](v1::RegisterRegionRequest& r) { r.set_name(""); },
       absl::StatusCode::kInvalidArgument, "name: empty"},
      {"no memory", [](v1::RegisterRegionRequest& r) { r.clear_system(); },
       absl::StatusCode::kInvalidArgument, "memory: missing"},
      {"unaligned offset",
       [](v1::RegisterRegionRequest& r) { r.mutable_system()->set_offset(6); },
       absl::StatusCode::kInvalidArgument, "not a multiple of 4"},
      {"another program's object",
       [](v1::RegisterRegionRequest& r) {
         r.mutable_system()->set_key(kForeignKey);
       },
       absl::StatusCode::kPermissionDenied, "does not start with '/gemm-'"},
      {"a FIFO under the name (it would block an open)",
       [](v1::RegisterRegionRequest& r) {
         r.mutable_system()->set_key(kFifoKey);
         r.mutable_system()->set_read_only(true);
       },
       absl::StatusCode::kInvalidArgument, "is not a shared-memory object"},
      {"short IPC handle",
       [](v1::RegisterRegionRequest& r) {
         r.mutable_cuda_ipc()->set_handle("xyz");
         r.mutable_cuda_ipc()->set_byte_size(64);
       },
       absl::StatusCode::kInvalidArgument, "a cudaIpcMemHandle_t has 64"},
  };
  for (const Case& c : cases) {
    v1::RegisterRegionRequest request = (*shm)->Describe("checked");
    c.change(request);
    auto info = client->RegisterRegion(request);
    ASSERT_FALSE(info.ok()) << c.what;
    EXPECT_EQ(info.status().code(), c.code) << c.what << ": " << info.status();
    EXPECT_NE(info.status().message().find(c.message), std::string::npos)
        << c.what << ": " << info.status();
  }
  // A name in use, and the per-client limit (8).
  auto info = client->RegisterRegion((*shm)->Describe("checked"));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->kind(), "system");
  EXPECT_EQ(info->byte_size(), 8192u);
#ifdef GEMM_REGION_TEST_ON_GPU
  EXPECT_TRUE(info->pinned());
#else
  EXPECT_FALSE(info->pinned());
#endif
  EXPECT_EQ(client->RegisterRegion((*shm)->Describe("checked")).status().code(),
            absl::StatusCode::kAlreadyExists);
  for (int i = 1; i < 8; ++i) {
    EXPECT_TRUE(
        client->RegisterRegion((*shm)->Describe("n" + std::to_string(i))).ok());
  }
  auto over = client->RegisterRegion((*shm)->Describe("one-too-many"));
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted)
      << over.status();
  auto listed = client->ListRegions();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 8u);
  EXPECT_TRUE(client->UnregisterRegion("checked").ok());
  for (int i = 1; i < 8; ++i) {
    EXPECT_TRUE(client->UnregisterRegion("n" + std::to_string(i)).ok());
  }
  EXPECT_EQ(client->UnregisterRegion("checked").code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(Mapped(server_->pid(), (*shm)->key()));
}

TEST_F(RegionTest, ARegionOpenedReadOnlyTakesOperandsButNoResult) {
  auto client = Connect(server_->address());
  auto shm =
      SharedMemoryRegion::Create(SharedMemoryRegion::UniqueKey("ro"), 1 << 16);
  ASSERT_TRUE(shm.ok());
  MixedJob job(**shm, "ro", 1 | 2, 20, 30, 40, false, false, 0.0f, 5);
  // Asked for, or (where the server is not root) forced by the object's
  // mode.
  v1::RegisterRegionRequest request = (*shm)->Describe("ro");
  if (getuid() == 0) {
    request.mutable_system()->set_read_only(true);
  } else {
    ASSERT_TRUE((*shm)->Chmod(0400).ok());
  }
  auto info = client->RegisterRegion(request);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->read_only());
  ASSERT_TRUE(client->Gemm(job.args, job.out.data()).ok());
  EXPECT_LE(job.Error(**shm), 1e-5);
  job.args.result_region = {"ro", 60000};
  auto refused = client->Gemm(job.args, job.out.data());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("read-only"), std::string::npos)
      << refused.status();
  EXPECT_TRUE(client->UnregisterRegion("ro").ok());
}

TEST_F(RegionTest, OneCallerCannotSeeOrNameAnothersRegions) {
  // 127.0.0.1 and ::1 are two callers to a server without authentication.
  auto owner = Connect(server_->address());
  auto other = Connect(server_->address_v6());
  auto shm = Register(*owner, "mine", 1 << 16);
  MixedJob job(*shm, "mine", 1 | 2, 8, 8, 8, false, false, 0.0f, 3);
  ASSERT_TRUE(owner->Gemm(job.args, job.out.data()).ok());
  auto theirs = other->ListRegions();
  ASSERT_TRUE(theirs.ok());
  EXPECT_TRUE(theirs->empty());
  auto named = other->Gemm(job.args, job.out.data());
  EXPECT_EQ(named.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(other->UnregisterRegion("mine").code(),
            absl::StatusCode::kNotFound);
  // The same name is free for the other caller, and stays apart.
  auto second = Register(*other, "mine", 1 << 16);
  auto listed = owner->ListRegions();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().key(), shm->key());
  EXPECT_TRUE(owner->UnregisterRegion("mine").ok());
  EXPECT_TRUE(other->UnregisterRegion("mine").ok());
}

// Unregister answers once no job uses the region: by then the job has
// written its whole result there. The result is read at that moment, before
// the job's own answer is awaited (which may reach this client's callback
// thread later than Unregister's answer: they are two calls). A server that
// answered at once would leave the result region as poisoned (NaN) as it
// was, or half written.
TEST_F(RegionTest, UnregisterAnswersOnceTheJobUsingTheRegionHasEnded) {
  auto client = Connect(server_->address());
  constexpr uint32_t kN = 1200;  // long enough on two cores to overlap
  auto shm = Register(*client, "busy", 4ull * 3 * kN * kN + 4096);
  MixedJob job(*shm, "busy", 1 | 2 | 8, kN, kN, kN, false, false, 0.0f, 11);
  std::atomic<bool> job_done{false};
  std::promise<absl::StatusOr<v1::Timing>> result;
  client->GemmAsync(job.args, nullptr, [&](absl::StatusOr<v1::Timing> t) {
    job_done = true;
    result.set_value(std::move(t));
  });
  // Until the job holds the region, Unregister would answer at once (a
  // fast device may have finished the job already).
  bool job_held_the_region = false;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto listed = client->ListRegions();
        EXPECT_TRUE(listed.ok()) << listed.status();
        job_held_the_region =
            listed.ok() && !listed->empty() && listed->front().jobs() > 0;
        return job_done.load() || job_held_the_region;
      },
      absl::Seconds(10)));
  const absl::Status unregistered = client->UnregisterRegion("busy");
  ASSERT_TRUE(unregistered.ok()) << unregistered;
  // The result as it is the moment Unregister answers (the region is the
  // caller's object, still mapped here), judged afterwards.
  const std::vector<float> at_unregister = job.RegionResultNow(*shm);
  EXPECT_LE(job.ErrorOf(at_unregister.data()), 1e-5)
      << (job_held_the_region ? "the job held the region"
                              : "the job had already answered");
  auto timing = result.get_future().get();
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_FALSE(Mapped(server_->pid(), shm->key()));
}

TEST_F(RegionTest, ARegionOfACallerThatExitedIsUnmappedWhenIdle) {
  const std::string key = SharedMemoryRegion::UniqueKey("orphan");
  const std::string address = server_->address();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Registers and exits at once: no unregister, no unlink.
    auto shm = SharedMemoryRegion::Create(key, 1 << 16);
    if (!shm.ok()) _exit(2);
    GemmClient::Options options;
    options.target = address;
    auto client = GemmClient::Create(options);
    if (!client.ok()) _exit(3);
    if (!(*client)->RegisterRegion((*shm)->Describe("orphan")).ok()) _exit(4);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(Mapped(server_->pid(), key));
  // --region-idle-timeout-s 2, swept every half second.
  EXPECT_TRUE(WaitUntil([&] { return !Mapped(server_->pid(), key); },
                        absl::Seconds(10), absl::Milliseconds(100)));
  shm_unlink(key.c_str());
}

TEST_F(RegionTest, ATruncatedObjectFailsItsJobAndTheServerGoesOn) {
  auto client = Connect(server_->address());
  auto shm = Register(*client, "shrinks", 1 << 20);
  MixedJob job(*shm, "shrinks", 1 | 2 | 8, 100, 100, 100, false, false, 0.0f,
               13);
  // The caller shrinks its object under the server's mapping.
  const int fd = shm_open(shm->key().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 0), 0);
  close(fd);
  std::vector<float> out(100 * 100);
  auto timing = client->Gemm(job.args, out.data());
#ifdef GEMM_REGION_TEST_ON_GPU
  // Pinned pages stay with the driver: the device reads what they held,
  // and nothing on the host touches the mapping.
  (void)timing;
#else
  ASSERT_FALSE(timing.ok());
  EXPECT_EQ(timing.status().code(), absl::StatusCode::kFailedPrecondition)
      << timing.status();
  EXPECT_NE(timing.status().message().find("shrank"), std::string::npos)
      << timing.status();
  // The region stays broken.
  auto again = client->Gemm(job.args, out.data());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
#endif
  // The server lives and serves.
  MixedJob inline_job(*shm, "shrinks", 0, 50, 40, 30, false, false, 0.0f, 17);
  ASSERT_TRUE(client->Gemm(inline_job.args, inline_job.out.data()).ok());
  EXPECT_LE(inline_job.Error(*shm), 1e-5);
  EXPECT_TRUE(client->UnregisterRegion("shrinks").ok());
}

#ifdef GEMM_REGION_TEST_ON_GPU
TEST_F(RegionTest, CudaIpcOperandsAndResultStayOnTheDevice) {
  for (Path path : {Path::kUnary, Path::kStreamWhole}) {
    auto client = Connect(server_->address(), path);
    auto gpu = client::CudaIpcRegion::Create(4 << 20, 0);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    auto info = client->RegisterRegion((*gpu)->Describe("gpu"));
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->kind(), "cuda-ipc");
    uint64_t seed = 40;
    for (int mask : {1 | 2 | 4 | 8, 1 | 2, 8, 4 | 8, 2 | 4}) {
      // The same placement as MixedJob, in device memory.
      const uint32_t m = 130, n = 67, k = 99;
      std::vector<float> a(m * k), b(k * n), c(m * n), out(m * n, kNaN);
      FillRandom(a.data(), a.size(), seed += 3);
      FillRandom(b.data(), b.size(), seed + 1);
      FillRandom(c.data(), c.size(), seed + 2);
      GemmArgs args;
      args.problem = {m, n, k, mask == 8, true, 0.75f, -1.5f};
      const auto want =
          ReferenceGemm(args.problem, a.data(), b.data(), c.data());
      uint64_t offset = 256;
      auto place = [&](const std::vector<float>& data, const float** pointer,
                       RegionOffset* ref, bool in_region) {
        *pointer = data.data();
        if (!in_region) return;
        ASSERT_TRUE((*gpu)->Upload(offset, data.data(), 4 * data.size()).ok());
        *ref = RegionOffset{"gpu", offset};
        offset += 4 * data.size() + 512;
      };
      place(a, &args.a, &args.a_region, mask & 1);
      place(b, &args.b, &args.b_region, mask & 2);
      place(c, &args.c, &args.c_region, mask & 4);
      std::vector<float> result(m * n, kNaN);
      if (mask & 8) {
        ASSERT_TRUE((*gpu)->Upload(offset, result.data(), 4 * m * n).ok());
        args.result_region = RegionOffset{"gpu", offset};
      }
      auto timing = RunOne(*client, path, args, out.data());
      ASSERT_TRUE(timing.ok()) << mask << ": " << timing.status();
      if (mask & 8) {
        ASSERT_TRUE((*gpu)->Download(offset, result.data(), 4 * m * n).ok());
      } else {
        result = out;
      }
      EXPECT_LE(RelativeFrobeniusError(result.data(), want), 1e-5) << mask;
    }
    // A device the server does not have, and the CPU-less name.
    v1::RegisterRegionRequest wrong = (*gpu)->Describe("wrong");
    wrong.mutable_cuda_ipc()->set_device_uuid("GPU-00000000-0000");
    EXPECT_EQ(client->RegisterRegion(wrong).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(client->UnregisterRegion("gpu").ok());
  }
}
#else
TEST_F(RegionTest, CudaIpcIsRefusedOnTheCpuBackend) {
  auto client = Connect(server_->address());
  v1::RegisterRegionRequest request;
  request.set_name("gpu");
  request.mutable_cuda_ipc()->set_handle(std::string(64, '\1'));
  request.mutable_cuda_ipc()->set_device_uuid("GPU-1");
  request.mutable_cuda_ipc()->set_byte_size(1024);
  auto info = client->RegisterRegion(request);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(info.status().message().find("CUDA IPC regions need"),
            std::string::npos)
      << info.status();
}
#endif

}  // namespace
}  // namespace gemm::region_test
