// The fixture of the region suites (region_test*.cc, also built as
// gpu_region_test with GEMM_REGION_TEST_ON_GPU): one gemm-server for the
// suite (--backend cuda on the GPU build, skipping without a GPU), clients
// on each job path, jobs whose operands and result each live in a request
// or in a shared-memory region, and the server's mappings.
//
// Thread-safety: one test thread uses these; the fixture's server is the
// suite's.
//
//   TEST_F(RegionTest, X) {
//     auto client = Connect(server_->address());
//     auto shm = Register(*client, "x", 1 << 20);
//     MixedJob job(*shm, "x", 1 | 2 | 8, 10, 10, 10, false, false, 0, 1);
//   }
#ifndef GEMM_TESTS_REGION_TEST_FIXTURE_H_
#define GEMM_TESTS_REGION_TEST_FIXTURE_H_

#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <fstream>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "client/lib/gemm_client.h"
#include "client/lib/shm_region.h"
#include "common/reference_gemm.h"
#include "gtest/gtest.h"
#include "tests/server_process.h"
#ifdef GEMM_REGION_TEST_ON_GPU
#include "kernels/cuda_presence.h"
#endif

namespace gemm::region_test {

using client::GemmArgs;
using client::GemmClient;
using client::RegionOffset;
using client::SharedMemoryRegion;
using testing::ServerProcess;

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// How a job travels: the unary call, one whole-job stream message, or a
// params message and chunks.
enum class Path { kUnary, kStreamWhole, kStreamChunks };

inline std::string PathName(Path path) {
  switch (path) {
    case Path::kUnary:
      return "Unary";
    case Path::kStreamWhole:
      return "StreamWhole";
    default:
      return "StreamChunks";
  }
}

inline std::unique_ptr<GemmClient> Connect(const std::string& target,
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
inline std::vector<std::string> ShmMappingsOf(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("/dev/shm/") != std::string::npos) out.push_back(line);
  }
  return out;
}

inline bool Mapped(pid_t pid, const std::string& key) {
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

  static inline ServerProcess* server_ = nullptr;
  static inline std::string no_gpu_;
};

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
    return ErrorOf(args.result_region.used() ? reinterpret_cast<const float*>(
                                                   shm.data() + result_offset)
                                             : out.data());
  }

  // The result in the region now, copied out.
  std::vector<float> RegionResultNow(const SharedMemoryRegion& shm) const {
    const float* result =
        reinterpret_cast<const float*>(shm.data() + result_offset);
    return std::vector<float>(result, result + c.size());
  }

  // `result`'s error against the reference.
  double ErrorOf(const float* result) const {
    if (want.empty()) {
      want = ReferenceGemm(args.problem, a.data(), b.data(),
                           args.problem.beta != 0.0f ? c.data() : nullptr);
    }
    return RelativeFrobeniusError(result, want);
  }
};

inline absl::StatusOr<v1::Timing> RunOne(GemmClient& client, Path path,
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

}  // namespace gemm::region_test

#endif  // GEMM_TESTS_REGION_TEST_FIXTURE_H_
