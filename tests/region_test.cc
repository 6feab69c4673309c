// Shared-memory regions (gemm.proto's Region) end to end, on a real server
// process on a loopback port (the CPU backend): every mix of operands and
// result in requests and in a POSIX shared-memory region, on the unary call
// and on the stream (whole-job messages and chunks), against a float64
// reference with the result poisoned first; C updated in place; every
// refusal at registration and at admission, by name; two callers that
// cannot see each other's regions; Unregister waiting for the job that
// uses the region; a caller that exits without unregistering, whose region
// the server unmaps after its idle timeout; and a caller that truncates its
// object under the server, which fails its job and leaves the server
// serving.
//
// Built as gpu_region_test, the same tests run against --backend cuda (the
// region pinned with cudaHostRegister), plus CUDA IPC regions: operands and
// result in this process's GPU memory, opened by the server. They skip
// where there is no GPU.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <future>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/gemm_client.h"
#include "client/shm_region.h"
#include "common/reference_gemm.h"
#include "gtest/gtest.h"
#include "tests/server_process.h"
#ifdef GEMM_REGION_TEST_ON_GPU
#include <cuda_runtime_api.h>

#include "client/cuda_ipc_region.h"
#include "kernels/cuda_presence.h"
#endif

namespace gemm {
namespace {

using client::GemmArgs;
using client::GemmClient;
using client::RegionOffset;
using client::SharedMemoryRegion;
using testing::ServerProcess;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// How a job travels: the unary call, one whole-job stream message, or a
// params message and chunks.
enum class Path { kUnary, kStreamWhole, kStreamChunks };

std::string PathName(Path path) {
  switch (path) {
    case Path::kUnary:
      return "Unary";
    case Path::kStreamWhole:
      return "StreamWhole";
    default:
      return "StreamChunks";
  }
}

std::unique_ptr<GemmClient> Connect(const std::string& target,
                                    Path path = Path::kUnary) {
  GemmClient::Options options;
  options.target = target;
  options.max_unary_bytes = path == Path::kUnary ? (64 << 20) : 0;
  options.whole_job_max_bytes = path == Path::kStreamWhole ? (64 << 20) : 0;
  options.chunk_bytes = 4096;
  options.timeout = absl::Seconds(60);
  auto client = GemmClient::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return std::move(*client);
}

// The server process's mappings of POSIX shared memory (/dev/shm/...).
std::vector<std::string> ShmMappingsOf(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("/dev/shm/") != std::string::npos) out.push_back(line);
  }
  return out;
}

bool Mapped(pid_t pid, const std::string& key) {
  for (const std::string& line : ShmMappingsOf(pid)) {
    if (line.find(key) != std::string::npos) return true;
  }
  return false;
}

class RegionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<std::string> flags = {"--listen",
                                      "[::]:0",
                                      "--max-regions-per-client",
                                      "8",
                                      "--region-idle-timeout-s",
                                      "2"};
#ifdef GEMM_REGION_TEST_ON_GPU
    const absl::StatusOr<kernels::CudaPresence> gpu =
        kernels::ProbeCudaDevices();
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    if (!gpu->present) {
      no_gpu_ = gpu->why_absent;
      return;
    }
    flags.insert(flags.end(), {"--backend", "cuda"});
#endif
    server_ = new ServerProcess(flags);
    ASSERT_TRUE(server_->Start().ok()) << server_->Log();
  }
  static void TearDownTestSuite() {
    if (server_ == nullptr) return;
    EXPECT_EQ(server_->Stop(SIGTERM), 0) << server_->Log();
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (!no_gpu_.empty()) GTEST_SKIP() << no_gpu_;
  }

  // A region of `bytes` registered as `name` by `client`.
  std::unique_ptr<SharedMemoryRegion> Register(GemmClient& client,
                                               const std::string& name,
                                               uint64_t bytes) {
    auto shm =
        SharedMemoryRegion::Create(SharedMemoryRegion::UniqueKey(name), bytes);
    EXPECT_TRUE(shm.ok()) << shm.status();
    auto info = client.RegisterRegion((*shm)->Describe(name));
    EXPECT_TRUE(info.ok()) << info.status();
    return std::move(*shm);
  }

  static ServerProcess* server_;
  static std::string no_gpu_;
};
ServerProcess* RegionTest::server_ = nullptr;
std::string RegionTest::no_gpu_;

// One job whose operands and result each live in the request or in `shm`
// (at distinct offsets), by the bits of `mask`: 1 A, 2 B, 4 C, 8 result.
struct MixedJob {
  GemmArgs args;
  std::vector<float> a, b, c, out;
  // The float64 reference, computed by Error() the first time: not here,
  // where it would take seconds for the largest jobs between a region's
  // registration and its first use, past the suite's region idle timeout.
  mutable std::vector<double> want;
  uint64_t result_offset = 0;

  MixedJob(SharedMemoryRegion& shm, const std::string& region, int mask,
           uint32_t m, uint32_t n, uint32_t k, bool ta, bool tb, float beta,
           uint64_t seed) {
    a.resize(uint64_t{m} * k);
    b.resize(uint64_t{k} * n);
    c.resize(uint64_t{m} * n);
    FillRandom(a.data(), a.size(), seed);
    FillRandom(b.data(), b.size(), seed + 1);
    FillRandom(c.data(), c.size(), seed + 2);
    args.problem = {m, n, k, ta, tb, 1.25f, beta};
    out.assign(c.size(), kNaN);
    // A, B, C and the result one after another in the region, each 256
    // bytes apart (alignment the kernels may not assume).
    uint64_t offset = 4 * 7;  // deliberately not 16-byte aligned
    auto place = [&](const std::vector<float>& data, const float** pointer,
                     RegionOffset* ref, bool in_region) {
      if (!in_region) {
        *pointer = data.data();
        return;
      }
      std::copy(data.begin(), data.end(),
                reinterpret_cast<float*>(shm.data() + offset));
      *ref = RegionOffset{region, offset};
      offset += 4 * data.size() + 256;
    };
    place(a, &args.a, &args.a_region, mask & 1);
    place(b, &args.b, &args.b_region, mask & 2);
    place(c, &args.c, &args.c_region, mask & 4);
    if (beta == 0.0f) args.c = nullptr;
    if (mask & 8) {
      result_offset = offset;
      std::fill_n(reinterpret_cast<float*>(shm.data() + offset), c.size(),
                  kNaN);
      args.result_region = RegionOffset{region, offset};
      offset += 4 * c.size();
    }
    EXPECT_LE(offset, shm.size());
  }

  // The result, from the region or from `out`.
  double Error(const SharedMemoryRegion& shm) const {
    const float* result =
        args.result_region.used()
            ? reinterpret_cast<const float*>(shm.data() + result_offset)
            : out.data();
    if (want.empty()) {
      want = ReferenceGemm(args.problem, a.data(), b.data(),
                           args.problem.beta != 0.0f ? c.data() : nullptr);
    }
    return RelativeFrobeniusError(result, want);
  }
};

absl::StatusOr<v1::Timing> RunOne(GemmClient& client, Path path,
                                  const GemmArgs& args, float* out) {
  if (path == Path::kUnary) return client.Gemm(args, out);
  auto stream = client.OpenStream();
  std::promise<absl::StatusOr<v1::Timing>> result;
  stream->Submit(args, out, [&result](absl::StatusOr<v1::Timing> t) {
    result.set_value(std::move(t));
  });
  absl::StatusOr<v1::Timing> timing = result.get_future().get();
  absl::Status finished = stream->Finish();
  if (timing.ok() && !finished.ok()) return finished;
  return timing;
}

TEST_F(RegionTest, EveryMixOfRegionsAndRequestBytesMatchesTheReference) {
  for (Path path : {Path::kUnary, Path::kStreamWhole, Path::kStreamChunks}) {
    auto client = Connect(server_->address(), path);
    const std::string name = "mix-" + PathName(path);
    auto shm = Register(*client, name, 1 << 20);
    uint64_t seed = 10;
    for (int mask = 0; mask < 16; ++mask) {
      const bool ta = mask % 3 == 1, tb = mask % 5 == 2;
      const float beta = mask % 2 == 0 ? -0.5f : 0.0f;
      MixedJob job(*shm, name, mask, 67, 45, 33, ta, tb, beta, seed += 3);
      auto timing = RunOne(*client, path, job.args, job.out.data());
      ASSERT_TRUE(timing.ok())
          << PathName(path) << " mask " << mask << ": " << timing.status();
      EXPECT_LE(job.Error(*shm), 1e-5) << PathName(path) << " mask " << mask;
      if (mask & 8) {
        // Nothing came back: the poisoned output is untouched.
        EXPECT_TRUE(std::isnan(job.out[0])) << PathName(path) << " " << mask;
      }
    }
    // K = 0: C = beta * C, with C and the result in the region.
    MixedJob scale(*shm, name, 4 | 8, 9, 7, 0, false, false, 3.0f, 99);
    ASSERT_TRUE(RunOne(*client, path, scale.args, scale.out.data()).ok());
    EXPECT_LE(scale.Error(*shm), 1e-6);
    EXPECT_TRUE(client->UnregisterRegion(name).ok());
  }
}

TEST_F(RegionTest, CIsUpdatedInPlaceWhenTheResultNamesItsBytes) {
  auto client = Connect(server_->address());
  auto shm = Register(*client, "in-place", 1 << 16);
  MixedJob job(*shm, "in-place", 1 | 2 | 4, 31, 29, 23, false, true, 0.5f, 7);
  job.args.result_region = job.args.c_region;
  job.result_offset = job.args.c_region.offset;
  auto timing = client->Gemm(job.args, nullptr);
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_LE(job.Error(*shm), 1e-5);
  EXPECT_TRUE(client->UnregisterRegion("in-place").ok());
}

TEST_F(RegionTest, BadReferencesAreRefusedNamingTheOperand) {
  auto client = Connect(server_->address());
  auto shm = Register(*client, "refs", 4096);
  std::vector<float> a(16 * 16, 1.0f), b(16 * 16, 1.0f), out(16 * 16);
  auto job = [&] {
    GemmArgs args;
    args.problem = {16, 16, 16, false, false, 1.0f, 0.0f};
    args.a = a.data();
    args.b = b.data();
    return args;
  };
  struct Case {
    std::string what;
    std::function<void(GemmArgs&)> change;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"past the end",
       [](GemmArgs& g) {
         g.a_region = {"refs", 4096 - 1020};
       },
       absl::StatusCode::kInvalidArgument,
       "params.a_region: a's 1024 bytes from offset 3076"},
      {"unknown region",
       [](GemmArgs& g) {
         g.b_region = {"nope", 0};
       },
       absl::StatusCode::kInvalidArgument,
       "params.b_region: this caller has no region 'nope'"},
      {"unaligned offset",
       [](GemmArgs& g) {
         g.a_region = {"refs", 2};
       },
       absl::StatusCode::kInvalidArgument, "not a multiple of 4"},
      {"result over A",
       [](GemmArgs& g) {
         g.a_region = {"refs", 0};
         g.result_region = {"refs", 512};
       },
       absl::StatusCode::kInvalidArgument, "overlap A's [0, 1024)"},
      {"result partly over C",
       [](GemmArgs& g) {
         g.problem.beta = 1.0f;
         g.c_region = {"refs", 0};
         g.result_region = {"refs", 4};
       },
       absl::StatusCode::kInvalidArgument, "overlap C's"},
  };
  for (const Case& c : cases) {
    GemmArgs args = job();
    c.change(args);
    auto timing = client->Gemm(args, out.data());
    ASSERT_FALSE(timing.ok()) << c.what;
    EXPECT_EQ(timing.status().code(), c.code)
        << c.what << ": " << timing.status();
    EXPECT_NE(timing.status().message().find(c.message), std::string::npos)
        << c.what << ": " << timing.status();
  }
  // Bytes and a region for one operand, on the raw call (the library never
  // sends both).
  grpc::ClientContext context;
  v1::GemmRequest request;
  v1::GemmParams* params = request.mutable_params();
  params->set_m(16);
  params->set_n(16);
  params->set_k(16);
  params->set_alpha(1.0f);
  params->mutable_a_region()->set_region("refs");
  request.set_a(std::string(1024, '\0'));
  request.set_b(std::string(1024, '\0'));
  v1::GemmResponse response;
  grpc::Status both = client->stub().Gemm(&context, request, &response);
  EXPECT_EQ(both.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(both.error_message().find("a: 1024 bytes sent, but params.a_"
                                      "region puts it in region 'refs'"),
            std::string::npos)
      << both.error_message();
  // The server goes on serving.
  GemmArgs fine = job();
  EXPECT_TRUE(client->Gemm(fine, out.data()).ok());
  EXPECT_TRUE(client->UnregisterRegion("refs").ok());
}

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

TEST_F(RegionTest, UnregisterAnswersOnceTheJobUsingTheRegionHasEnded) {
  auto client = Connect(server_->address());
  constexpr uint32_t kN = 1200;  // long enough on two cores to overlap
  auto shm = Register(*client, "busy", 4ull * 3 * kN * kN + 4096);
  MixedJob job(*shm, "busy", 1 | 2 | 8, kN, kN, kN, false, false, 0.0f, 11);
  std::atomic<int64_t> job_done_ns{0};
  std::promise<absl::StatusOr<v1::Timing>> result;
  client->GemmAsync(job.args, nullptr, [&](absl::StatusOr<v1::Timing> t) {
    job_done_ns = std::chrono::steady_clock::now().time_since_epoch().count();
    result.set_value(std::move(t));
  });
  // Until the job holds the region, Unregister would answer at once.
  for (int i = 0; i < 200; ++i) {
    auto listed = client->ListRegions();
    ASSERT_TRUE(listed.ok());
    if (!listed->empty() && listed->front().jobs() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const absl::Status unregistered = client->UnregisterRegion("busy");
  ASSERT_TRUE(unregistered.ok()) << unregistered;
  const int64_t unregistered_ns =
      std::chrono::steady_clock::now().time_since_epoch().count();
  auto timing = result.get_future().get();
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_LE(job_done_ns.load(), unregistered_ns);
  EXPECT_LE(job.Error(*shm), 1e-5);
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
  bool unmapped = false;
  for (int i = 0; i < 100 && !unmapped; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    unmapped = !Mapped(server_->pid(), key);
  }
  EXPECT_TRUE(unmapped);
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
}  // namespace gemm
