#include "server/gemm_server.h"

#include "gtest/gtest.h"

namespace gemm::server {
namespace {

GemmServer::Options CpuOptions() {
  GemmServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.backend = "cpu";
  return options;
}

// Issue 11, defect 5: --max-message-bytes 1048576 with the default
// --result-chunk-bytes 1048576 was accepted, and every stream with a result
// of more than one chunk then ended RESOURCE_EXHAUSTED (a chunk plus its
// header is larger than a message may be).
TEST(GemmServerTest, RefusesResultChunksThatCannotFitInAMessage) {
  GemmServer::Options options = CpuOptions();
  options.limits.max_message_bytes = 1 << 20;
  options.limits.result_chunk_bytes = 1 << 20;
  auto server = GemmServer::Create(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("result_chunk_bytes"),
            absl::string_view::npos)
      << server.status();
  EXPECT_NE(server.status().message().find("max_message_bytes"),
            absl::string_view::npos)
      << server.status();

  options.limits.result_chunk_bytes = (1 << 20) - 1024;
  auto fits = GemmServer::Create(options);
  ASSERT_TRUE(fits.ok()) << fits.status();
  (*fits)->Shutdown(absl::ZeroDuration());
}

}  // namespace
}  // namespace gemm::server
