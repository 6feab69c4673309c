// JobStream against a scripted gemm.v1.GemmService in this process, on a
// real loopback port: the server reassembles each job the client sends
// (decoded with proto/wire_codec.h), and a per-test script decides what
// goes back (chunks, inline results, errors, silence, or the end of the
// stream). Outputs are poisoned with NaN and followed by a guard region, so
// that an unwritten element or a write past C shows.
// Here results: chunked and inline, one job failing among others, chunks
// outside C; job_stream_test_ending.cc has streams that end early,
// deadlines, Finish and retries. The fixture: job_stream_test_fixture.h.
#include "client/lib/job_stream.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/lib/job_stream_test_fixture.h"
#include "gtest/gtest.h"

namespace gemm::client::stream_test {
namespace {

// Operands go in small chunks (not as one message) and the result comes
// back in three chunks cut at odd byte offsets; both ends reassemble.
TEST_F(JobStreamTest, ResultInSeveralChunksLandsInTheCallersBuffer) {
  StartServer([](const ReceivedJob& job, int) { return InThreeChunks(job); });
  JobStream::Options options;
  options.limits.whole_job_max_bytes = 0;
  options.limits.chunk_bytes = 24;
  auto stream = Open(options);
  TestJob job(
      {.m = 9, .n = 7, .k = 5, .trans_b = true, .alpha = 0.5f, .beta = -2.0f},
      1);
  Submit(stream.get(), &job);
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(job.calls, 1);
  ASSERT_TRUE(job.result.ok()) << job.result.status();
  EXPECT_EQ(job.result->kernel(), "scripted");
  EXPECT_LE(job.Error(), 1e-6);
  EXPECT_TRUE(job.GuardIntact());
}

TEST_F(JobStreamTest, InlineResultInTheJobEnd) {
  StartServer([](const ReceivedJob& job, int) {
    return std::vector<Reply>{End(job, ResultOf(job))};
  });
  auto stream = Open();
  TestJob job({.m = 16, .n = 3, .k = 8}, 2);
  Submit(stream.get(), &job);
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(job.calls, 1);
  ASSERT_TRUE(job.result.ok()) << job.result.status();
  EXPECT_LE(job.Error(), 1e-6);
  EXPECT_TRUE(job.GuardIntact());
}

TEST_F(JobStreamTest, OneJobFailsWhileTheOthersSucceed) {
  StartServer([](const ReceivedJob& job, int n) {
    if (n == 1) {
      return std::vector<Reply>{
          Fail(job, absl::StatusCode::kResourceExhausted, "scripted refusal")};
    }
    return n == 0 ? InThreeChunks(job)
                  : std::vector<Reply>{End(job, ResultOf(job))};
  });
  auto stream = Open();
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 3; ++i) {
    jobs.push_back(std::make_unique<TestJob>(
        GemmProblem{.m = 6, .n = 6, .k = uint32_t(4 + i)}, 10 * i));
    Submit(stream.get(), jobs.back().get());
  }
  EXPECT_TRUE(stream->Finish().ok());
  for (const auto& job : jobs) EXPECT_EQ(job->calls, 1);
  EXPECT_EQ(jobs[1]->result.status(),
            absl::ResourceExhaustedError("scripted refusal"));
  EXPECT_TRUE(jobs[1]->Untouched());
  for (int i : {0, 2}) {
    ASSERT_TRUE(jobs[i]->result.ok()) << jobs[i]->result.status();
    EXPECT_LE(jobs[i]->Error(), 1e-6);
  }
}

// A chunk that would write outside C fails its job with a clear status and
// writes nothing outside C; so does a result of the wrong size. The job
// after them is unaffected.
TEST_F(JobStreamTest, ChunksOutsideCFailTheirJobAndWriteNothingThere) {
  StartServer([](const ReceivedJob& job, int n) {
    const std::string c = ResultOf(job);
    switch (n) {
      case 0:  // past the end
        return std::vector<Reply>{Chunk(job, c.size() - 4, c.substr(0, 8)),
                                  End(job)};
      case 1:  // too many bytes
        return std::vector<Reply>{Chunk(job, 0, c + "more"), End(job)};
      case 2:  // an offset far beyond C, then the whole right result
        return std::vector<Reply>{Chunk(job, uint64_t{1} << 62, c),
                                  Chunk(job, 0, c), End(job)};
      case 3:  // too few bytes
        return std::vector<Reply>{Chunk(job, 0, c.substr(0, 8)), End(job)};
      default:
        return InThreeChunks(job);
    }
  });
  auto stream = Open();
  std::vector<std::unique_ptr<TestJob>> jobs;
  for (int i = 0; i < 5; ++i) {
    jobs.push_back(
        std::make_unique<TestJob>(GemmProblem{.m = 4, .n = 5, .k = 6}, i));
    Submit(stream.get(), jobs.back().get());
  }
  EXPECT_TRUE(stream->Finish().ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(jobs[i]->calls, 1);
    EXPECT_EQ(jobs[i]->result.status().code(), absl::StatusCode::kInternal);
    EXPECT_NE(jobs[i]->result.status().message().find("past the end of C"),
              std::string::npos)
        << jobs[i]->result.status();
    EXPECT_TRUE(jobs[i]->GuardIntact()) << i;
  }
  EXPECT_EQ(
      jobs[3]->result.status(),
      absl::InternalError("job 4: server sent 8 bytes of C, expected 80"));
  ASSERT_TRUE(jobs[4]->result.ok()) << jobs[4]->result.status();
  EXPECT_LE(jobs[4]->Error(), 1e-6);
  EXPECT_TRUE(jobs[4]->GuardIntact());
}

}  // namespace
}  // namespace gemm::client::stream_test
