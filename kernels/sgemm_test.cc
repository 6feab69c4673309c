// The launch contract without a GPU: the registry, argument validation and
// the errors Launch returns before touching the device.
#include "kernels/sgemm.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/sgemm_launchers.h"
#include "kernels/v10_tile_sweep.h"

namespace gemm::kernels {
namespace {

// Never dereferenced: validation only looks at pointers' nullness.
float* FakeDevicePointer() {
  alignas(16) static float storage[4];
  return storage;
}

SgemmArgs ValidArgs() {
  SgemmArgs args;
  args.m = 3;
  args.n = 5;
  args.k = 7;
  args.a = FakeDevicePointer();
  args.lda = 7;
  args.b = FakeDevicePointer();
  args.ldb = 5;
  args.c = FakeDevicePointer();
  args.ldc = 5;
  return args;
}

TEST(KernelRegistryTest, NamesInTeachingOrder) {
  EXPECT_EQ(KernelRegistry::Global().Names(),
            (std::vector<std::string>{"v0", "v1", "v2", "v3", "v4", "v5", "v6",
                                      "v7", "v7-64x64", "v8", "v9", "v10",
                                      "v10-64x64", "v10-packed", "v11", "v12",
                                      "cublas", "cublas-tf32", "cublas-bf16"}));
}

TEST(KernelRegistryTest, FindKnownAndUnknown) {
  const KernelRegistry& registry = KernelRegistry::Global();
  for (const std::string& name : registry.Names()) {
    const SgemmKernel* kernel = registry.Find(name);
    ASSERT_NE(kernel, nullptr) << name;
    EXPECT_EQ(kernel->name(), name);
    EXPECT_FALSE(kernel->description().empty());
    const Precision want = name == "cublas-tf32"   ? Precision::kTf32
                           : name == "cublas-bf16" ? Precision::kBf16
                           : name == "v9" || name == "v12"
                               ? Precision::kFp32Tensor
                               : Precision::kFp32;
    EXPECT_EQ(kernel->precision(), want) << name;
  }
  EXPECT_EQ(registry.Find("v99"), nullptr);
  EXPECT_EQ(registry.Find(""), nullptr);
}

class FakeKernel : public SgemmKernel {
 public:
  std::string_view name() const override { return "fake"; }
  std::string_view description() const override { return "does nothing"; }
  absl::Status CanImplement(const SgemmArgs&) const override {
    return absl::OkStatus();
  }
  absl::Status Launch(const SgemmArgs&, cudaStream_t) const override {
    return absl::OkStatus();
  }
};

TEST(KernelRegistryTest, RegisterRejectsDuplicateNames) {
  KernelRegistry registry;
  EXPECT_TRUE(registry.Register(std::make_unique<FakeKernel>()).ok());
  EXPECT_EQ(registry.Register(std::make_unique<FakeKernel>()).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.Names(), std::vector<std::string>{"fake"});
}

TEST(CudaStatusTest, FormatsTheError) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "x").ok());
  const absl::Status status = CudaStatus(cudaErrorInvalidValue, "cudaMemcpy");
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(), std::string("cudaMemcpy: ") +
                                  cudaGetErrorString(cudaErrorInvalidValue));
}

class LaunchContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  const SgemmKernel& kernel() const {
    return *KernelRegistry::Global().Find(GetParam());
  }
  void ExpectInvalid(const SgemmArgs& args, const std::string& why) {
    const absl::Status status = kernel().CanImplement(args);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << why << ": " << status;
  }
};

TEST_P(LaunchContractTest, AcceptsValidProblems) {
  SgemmArgs args = ValidArgs();
  EXPECT_TRUE(kernel().CanImplement(args).ok());
  args.trans_a = args.trans_b = true;
  args.lda = 3;  // stored A is k x m
  args.ldb = 7;  // stored B is n x k
  EXPECT_TRUE(kernel().CanImplement(args).ok());
  args = ValidArgs();
  args.k = 0;
  args.a = args.b = nullptr;  // not read when k == 0
  EXPECT_TRUE(kernel().CanImplement(args).ok());
  args = ValidArgs();
  args.m = 0;
  args.c = nullptr;  // empty problem: nothing read or written
  EXPECT_TRUE(kernel().CanImplement(args).ok());
  args = ValidArgs();
  args.batch_count = 4;
  args.stride_a = 0;  // one A for every member
  args.stride_b = 35;
  args.stride_c = 15;
  EXPECT_TRUE(kernel().CanImplement(args).ok());
}

TEST_P(LaunchContractTest, RejectsInvalidProblems) {
  SgemmArgs args = ValidArgs();
  args.m = -1;
  ExpectInvalid(args, "negative m");
  args = ValidArgs();
  args.batch_count = 0;
  ExpectInvalid(args, "batch_count 0");
  args = ValidArgs();
  args.lda = 6;
  ExpectInvalid(args, "lda < k");
  args = ValidArgs();
  args.trans_a = true;  // stored A is 7 x 3: lda >= 3 would do, but ldb stays
  args.lda = 2;
  ExpectInvalid(args, "lda < m with trans_a");
  args = ValidArgs();
  args.ldb = 4;
  ExpectInvalid(args, "ldb < n");
  args = ValidArgs();
  args.trans_b = true;
  args.ldb = 6;
  ExpectInvalid(args, "ldb < k with trans_b");
  args = ValidArgs();
  args.ldc = 4;
  ExpectInvalid(args, "ldc < n");
  args = ValidArgs();
  args.c = nullptr;
  ExpectInvalid(args, "null c");
  args = ValidArgs();
  args.b = nullptr;
  ExpectInvalid(args, "null b with k > 0");
  args = ValidArgs();
  args.batch_count = 2;
  args.stride_a = args.stride_b = 64;
  args.stride_c = 14;
  ExpectInvalid(args, "overlapping C members");
  args.stride_c = 15;
  args.stride_b = -1;
  ExpectInvalid(args, "negative stride");
}

TEST_P(LaunchContractTest, LaunchNeedsAnExplicitStream) {
  EXPECT_EQ(kernel().Launch(ValidArgs(), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kernel().Launch(ValidArgs(), cudaStreamLegacy).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(LaunchContractTest, LaunchValidatesFirst) {
  SgemmArgs args = ValidArgs();
  args.ldc = 1;
  // Any stream value: validation fails before the stream is looked at.
  EXPECT_EQ(
      kernel().Launch(args, reinterpret_cast<cudaStream_t>(0x1234)).code(),
      absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(AllKernels, LaunchContractTest,
                         ::testing::ValuesIn(KernelRegistry::Global().Names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           // Test names take letters, digits and '_' only
                           // ("v7-64x64").
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(ChapterKernelsTest, RejectShapesBeyondTheGrid) {
  SgemmArgs args = ValidArgs();
  args.m = kMaxTiledDim + 1;
  args.trans_a = true;
  args.lda = args.m;
  for (const char* name :
       {"v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v7-64x64", "v8"}) {
    EXPECT_EQ(KernelRegistry::Global().Find(name)->CanImplement(args).code(),
              absl::StatusCode::kUnimplemented)
        << name;
  }
}

// gemm-bench --tile-sweep's kernels: each configuration once, v10's own
// first, all taking an NN problem, none of them in the served registry.
TEST(TileSweepTest, ConfigurationsAreNamedOnceAndNeverServed) {
  const std::vector<std::unique_ptr<SgemmKernel>> sweep =
      MakeV10TileSweepKernels();
  ASSERT_FALSE(sweep.empty());
  EXPECT_EQ(sweep.front()->name(), "v10t-128x128x16-w64x32-s3-b2");
  std::vector<std::string> names;
  for (const auto& kernel : sweep) {
    const std::string name(kernel->name());
    EXPECT_EQ(name.rfind("v10t-", 0), 0u) << name;
    EXPECT_EQ(KernelRegistry::Global().Find(name), nullptr) << name;
    EXPECT_TRUE(kernel->CanImplement(ValidArgs()).ok()) << name;
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
}

}  // namespace
}  // namespace gemm::kernels
