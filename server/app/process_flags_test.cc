#include "server/app/process_flags.h"

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/process_tuning.h"
#include "gtest/gtest.h"

namespace gemm::server {
namespace {

// Issue 37: the CUDA backend's 8 MiB default halved large-job throughput;
// the default is 1024 MiB whatever the backend (decision 56).
TEST(ProcessFlagsTest, TheTrimThresholdDefaultsTo1024MiB) {
  CLI::App app;
  ProcessSettings settings;
  AddProcessFlags(app, settings);
  std::vector<std::string> none;
  app.parse(none);
  EXPECT_EQ(ApplyTrimThreshold(settings), 1024);
  EXPECT_EQ(MallocTrimThresholdSet(), uint64_t{1} << 30);

  CLI::App app8;
  ProcessSettings low;
  AddProcessFlags(app8, low);
  std::vector<std::string> eight = {"8", "--malloc-trim-threshold-mib"};
  app8.parse(eight);
  EXPECT_EQ(ApplyTrimThreshold(low), 8);
  EXPECT_EQ(MallocTrimThresholdSet(), uint64_t{8} << 20);
}

}  // namespace
}  // namespace gemm::server
