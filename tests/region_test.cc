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
// Here every mix of regions and request bytes, C in place and bad
// references; region_test_lifecycle.cc has registration, callers,
// unregistering, idle and truncated regions and CUDA IPC. The fixture:
// tests/region_test_fixture.h.
#include <vector>

#include "client/lib/gemm_client.h"
#include "client/lib/shm_region.h"
#include "gtest/gtest.h"
#include "tests/region_test_fixture.h"

namespace gemm::region_test {
namespace {

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

}  // namespace
}  // namespace gemm::region_test
