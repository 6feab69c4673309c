// RegionRegistry on real POSIX shared memory with the CPU executor: holds
// and their bounds, Unregister waiting for the last hold, idle expiry, and
// an object truncated under the mapping (MappingGuard), which breaks the
// region without killing the process, while a fault outside any guarded
// mapping still does.
#include "server/regions/region_registry.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "server/cpu/cpu_executor.h"
#include "server/regions/mapping_guard.h"

namespace gemm::server {
namespace {

class Object {
 public:
  explicit Object(uint64_t bytes)
      : key_("/gemm-registry-test-" + std::to_string(getpid()) + "-" +
             std::to_string(next_++)) {
    const int fd = shm_open(key_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
    close(fd);
  }
  ~Object() { shm_unlink(key_.c_str()); }
  void Truncate() {
    const int fd = shm_open(key_.c_str(), O_RDWR, 0);
    EXPECT_EQ(ftruncate(fd, 0), 0);
    close(fd);
  }
  v1::RegisterRegionRequest Request(const std::string& name, uint64_t offset,
                                    uint64_t bytes) const {
    v1::RegisterRegionRequest r;
    r.set_name(name);
    r.mutable_system()->set_key(key_);
    r.mutable_system()->set_offset(offset);
    r.mutable_system()->set_byte_size(bytes);
    return r;
  }
  const std::string& key() const { return key_; }

 private:
  static inline int next_ = 0;
  std::string key_;
};

class RegionRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cpu = CpuExecutor::Create(CpuExecutor::Options());
    ASSERT_TRUE(cpu.ok());
    executor_ = std::move(*cpu);
  }
  std::unique_ptr<Executor> executor_;
};

TEST_F(RegionRegistryTest, HoldsAreBoundedByTheRegionAndSeeItsBytes) {
  RegionRegistry registry({}, executor_.get());
  Object object(3 * 4096);
  // A region that starts off a page boundary.
  ASSERT_TRUE(registry.Register("me", object.Request("r", 4100, 8000)).ok());
  auto held = registry.Hold("me", RegionRef{"r", 4000}, 4000, "a", false);
  ASSERT_TRUE(held.ok()) << held.status();
  held->host[0] = 3.5f;
  // The same bytes through a mapping of the test's own.
  const int fd = shm_open(object.key().c_str(), O_RDONLY, 0);
  void* mine = mmap(nullptr, 3 * 4096, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  EXPECT_EQ(static_cast<const float*>(mine)[(4100 + 4000) / 4], 3.5f);
  munmap(mine, 3 * 4096);
  EXPECT_EQ(registry.Hold("me", RegionRef{"r", 4004}, 4000, "a", false)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      registry.Hold("you", RegionRef{"r", 0}, 4, "a", false).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_F(RegionRegistryTest, UnregisterReportsOnceTheLastHoldIsGone) {
  RegionRegistry registry({}, executor_.get());
  Object object(4096);
  ASSERT_TRUE(registry.Register("me", object.Request("r", 0, 4096)).ok());
  auto held = registry.Hold("me", RegionRef{"r", 0}, 64, "b", false);
  ASSERT_TRUE(held.ok());
  bool done = false;
  ASSERT_TRUE(registry.Unregister("me", "r", [&] { done = true; }).ok());
  EXPECT_FALSE(done);
  EXPECT_EQ(registry.size(), 0u);
  // No new hold on a name that is gone.
  EXPECT_FALSE(registry.Hold("me", RegionRef{"r", 0}, 4, "a", false).ok());
  *held = RegionSpan();
  EXPECT_TRUE(done);
  EXPECT_EQ(registry.Unregister("me", "r", [] {}).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RegionRegistryTest, IdleRegionsExpireButHeldOnesDoNot) {
  RegionRegistry::Options options;
  options.idle_timeout = absl::Seconds(10);
  RegionRegistry registry(options, executor_.get());
  Object object(4096);
  ASSERT_TRUE(registry.Register("me", object.Request("idle", 0, 64)).ok());
  ASSERT_TRUE(registry.Register("me", object.Request("held", 0, 64)).ok());
  auto held = registry.Hold("me", RegionRef{"held", 0}, 64, "a", false);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(registry.ExpireIdle(absl::Now() + absl::Seconds(5)), 0);
  EXPECT_EQ(registry.ExpireIdle(absl::Now() + absl::Seconds(11)), 1);
  EXPECT_EQ(registry.size(), 1u);
  *held = RegionSpan();
  EXPECT_EQ(registry.ExpireIdle(absl::Now() + absl::Seconds(11)), 1);
  EXPECT_EQ(registry.size(), 0u);
}

TEST_F(RegionRegistryTest, ATruncatedObjectBreaksTheRegionNotTheProcess) {
  RegionRegistry registry({}, executor_.get());
  Object object(1 << 16);
  ASSERT_TRUE(registry.Register("me", object.Request("r", 0, 1 << 16)).ok());
  auto held = registry.Hold("me", RegionRef{"r", 0}, 1 << 16, "a", false);
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(held->hold->Intact().ok());
  object.Truncate();
  // Past the new end: SIGBUS, caught; the read completes with zeros.
  volatile float* data = held->host;
  EXPECT_EQ(data[1000], 0.0f);
  data[2000] = 1.0f;
  EXPECT_EQ(held->hold->Intact().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      registry.Hold("me", RegionRef{"r", 0}, 4, "a", false).status().code(),
      absl::StatusCode::kFailedPrecondition);
}

TEST_F(RegionRegistryTest, TheServersLimitsHold) {
  RegionRegistry::Options options;
  options.max_system_bytes = 10000;
  options.max_regions_per_owner = 2;
  RegionRegistry registry(options, executor_.get());
  Object object(1 << 16);
  ASSERT_TRUE(registry.Register("me", object.Request("a", 0, 6000)).ok());
  EXPECT_EQ(
      registry.Register("you", object.Request("b", 0, 6000)).status().code(),
      absl::StatusCode::kResourceExhausted)
      << "bytes of all owners together";
  ASSERT_TRUE(registry.Register("me", object.Request("b", 0, 4000)).ok());
  EXPECT_EQ(registry.Register("me", object.Request("c", 0, 4)).status().code(),
            absl::StatusCode::kResourceExhausted)
      << "regions per owner";
  ASSERT_TRUE(registry.Unregister("me", "a", [] {}).ok());
  EXPECT_TRUE(registry.Register("you", object.Request("b", 0, 6000)).ok())
      << "bytes come back when a region goes";
}

TEST(MappingGuardDeathTest, AFaultOutsideEveryGuardStillKills) {
  Object object(1 << 16);
  Object other(1 << 16);
  auto map = [](const Object& o) {
    const int fd = shm_open(o.key().c_str(), O_RDWR, 0);
    void* p = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return static_cast<volatile float*>(p);
  };
  volatile float* guarded = map(object);
  MappingGuard guard(const_cast<float*>(guarded), 1 << 16);
  volatile float* unguarded = map(other);
  other.Truncate();
  EXPECT_DEATH(unguarded[100] = 1.0f, "");
}

}  // namespace
}  // namespace gemm::server
