// GemmStream in this process: GemmServiceImpl with the real CpuExecutor and
// BatchScheduler on a loopback port, driven with raw messages
// (proto/wire_codec.h) over a grpc::GenericStub, so that each test can send
// exactly the parts it means to, including malformed ones. Results are
// compared with a float64 reference; outputs start poisoned (NaN).
// Here the protocol, job by job; gemm_stream_reactor_test_flow.cc has
// cancellation, flow control, drain and stalled jobs.
#include "server/rpc/gemm_stream_reactor.h"

#include <map>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/wire_codec.h"
#include "server/rpc/gemm_stream_reactor_test_fixture.h"

namespace gemm::server::stream_test {
namespace {

TEST_F(GemmStreamReactorTest, ChunkedJobIsReassembled) {
  executor_->Open();
  const Job job(Problem(37, 29, 41, /*beta=*/-0.5f, true, false), 11);
  RawStream stream(stub_.get());
  // Chunk sizes that do not divide the operands.
  SendChunked(stream, 5, job, 700);
  std::map<uint64_t, Received> got;
  ASSERT_TRUE(stream.Finish(&got, {{5, job.problem.c_elements()}}).ok());
  ASSERT_EQ(got.size(), 1u);
  ExpectCorrect(got[5], job);
  // 37 * 29 * 4 bytes in chunks of at most 1000.
  EXPECT_EQ(got[5].chunks, 5);
  EXPECT_EQ(got[5].end.timing().kernel(), "cpu");
  EXPECT_EQ(got[5].end.timing().device(), "cpu");
}

TEST_F(GemmStreamReactorTest, WholeJobMessageWithInlineResult) {
  executor_->Open();
  const Job job(Problem(9, 13, 17, 0.0f, false, true), 21);
  RawStream stream(stub_.get());
  ASSERT_TRUE(stream.Write(
      wire::EncodeWholeJob(3, job.Params(1 << 20), job.Operands())));
  std::map<uint64_t, Received> got;
  ASSERT_TRUE(stream.Finish(&got, {{3, job.problem.c_elements()}}).ok());
  ExpectCorrect(got[3], job);
  EXPECT_EQ(got[3].chunks, 0) << "C fits inline: no chunks";
}

TEST_F(GemmStreamReactorTest, OutOfOrderOffsetFailsTheJobAlone) {
  executor_->Open();
  const Job job(Problem(8, 8, 8), 31);
  const Job other(Problem(6, 5, 4), 41);
  RawStream stream(stub_.get());
  v1::StreamRequest first;
  first.set_job_id(1);
  *first.mutable_params() = job.Params();
  ASSERT_TRUE(stream.WritePart(first, ""));
  v1::StreamRequest part;
  part.set_job_id(1);
  part.set_operand(v1::OPERAND_A);
  part.set_offset(0);
  ASSERT_TRUE(stream.WritePart(part, job.Bytes(job.a).substr(0, 64)));
  part.set_offset(128);  // 64 expected
  ASSERT_TRUE(stream.WritePart(part, job.Bytes(job.a).substr(128, 64)));
  // The failed job's later parts are ignored, its end included.
  part.set_offset(192);
  part.set_end_of_job(true);
  ASSERT_TRUE(stream.WritePart(part, job.Bytes(job.a).substr(192, 64)));
  SendChunked(stream, 2, other, 1 << 20);
  std::map<uint64_t, Received> got;
  ASSERT_TRUE(stream.Finish(&got, {{2, other.problem.c_elements()}}).ok());
  EXPECT_EQ(got[1].ends, 1);
  EXPECT_EQ(got[1].end.code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(got[1].end.message().find("offset"), std::string::npos);
  EXPECT_NE(got[1].end.message().find("expected offset 64, got 128"),
            std::string::npos)
      << got[1].end.message();
  ExpectCorrect(got[2], other);
}

// A part of a job that was never started belongs to no job: the stream
// breaks, and no id gets a JobEnd it did not open.
TEST_F(GemmStreamReactorTest, DataForAJobNeverStartedBreaksTheStream) {
  RawStream stream(stub_.get());
  v1::StreamRequest part;
  part.set_job_id(7);
  part.set_operand(v1::OPERAND_A);
  part.set_end_of_job(true);
  ASSERT_TRUE(stream.WritePart(part, "abcd"));
  std::map<uint64_t, Received> got;
  const grpc::Status status = stream.Finish(&got, {});
  EXPECT_EQ(status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("message 1 of the stream: job_id 7: "
                                        "no such job is being received"),
            std::string::npos)
      << status.error_message();
  EXPECT_EQ(got.count(7), 0u);
}

// Params again for an open job: the job ends once (ABORTED), the stream
// breaks.
TEST_F(GemmStreamReactorTest, ParamsSentTwiceBreaksTheStream) {
  const Job job(Problem(4, 4, 4), 51);
  RawStream stream(stub_.get());
  v1::StreamRequest first;
  first.set_job_id(9);
  *first.mutable_params() = job.Params();
  ASSERT_TRUE(stream.WritePart(first));
  ASSERT_TRUE(stream.WritePart(first));
  std::map<uint64_t, Received> got;
  const grpc::Status status = stream.Finish(&got, {});
  EXPECT_EQ(status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("job_id 9: params for a job that is "
                                        "open"),
            std::string::npos)
      << status.error_message();
  EXPECT_EQ(got[9].ends, 1);
  EXPECT_EQ(got[9].end.code(), grpc::ABORTED);
  EXPECT_NE(got[9].end.message().find("stream broke"), std::string::npos)
      << got[9].end.message();
}

// Issue 11, defect 3: an unparseable message was answered under the
// previous message's job id, which then got two JobEnds.
TEST_F(GemmStreamReactorTest, MalformedMessageBreaksTheStreamNotAnotherJob) {
  executor_->Open();
  const Job job(Problem(9, 7, 5), 91);
  struct Case {
    const char* name;
    std::string bytes;
  };
  // job_id 2, then field 1 with wire type 7; and a whole job cut short.
  std::string cut;
  {
    grpc::ByteBuffer buffer =
        wire::EncodeWholeJob(2, job.Params(), job.Operands());
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(buffer.Dump(&slices).ok());
    for (const grpc::Slice& slice : slices) {
      cut.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    cut.resize(cut.size() / 2);
  }
  const std::vector<Case> cases = {
      {"bad wire type", std::string("\x08\x02\x0f")}, {"cut short", cut}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RawStream stream(stub_.get());
    ASSERT_TRUE(
        stream.Write(wire::EncodeWholeJob(1, job.Params(), job.Operands())));
    stream.WriteBytes(c.bytes);
    // Not read: the stream is broken by then.
    stream.Write(wire::EncodeWholeJob(3, job.Params(), job.Operands()));
    std::map<uint64_t, Received> got;
    const grpc::Status status =
        stream.Finish(&got, {{1, job.problem.c_elements()}});
    EXPECT_EQ(status.error_code(), grpc::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("message 2 of the stream: "
                                          "malformed StreamRequest"),
              std::string::npos)
        << status.error_message();
    ExpectCorrect(got[1], job);
    EXPECT_EQ(got.count(2), 0u);
    EXPECT_EQ(got.count(3), 0u);
  }
}

// Issue 11, defect 3: a second job under the id of a running one got its
// own JobEnd under that id.
TEST_F(GemmStreamReactorTest, DuplicateIdOfARunningJobBreaksTheStream) {
  const Job first(Problem(16, 8, 8), 101);
  const Job second(Problem(8, 16, 8), 111);
  RawStream stream(stub_.get());
  ASSERT_TRUE(
      stream.Write(wire::EncodeWholeJob(1, first.Params(), first.Operands())));
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (executor_->batches() < 1 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(executor_->batches(), 1);
  ASSERT_TRUE(stream.Write(
      wire::EncodeWholeJob(1, second.Params(), second.Operands())));
  // The duplicate must be read while the first job is still running.
  absl::SleepFor(absl::Milliseconds(200));
  executor_->Open();
  std::map<uint64_t, Received> got;
  const grpc::Status status =
      stream.Finish(&got, {{1, first.problem.c_elements()}});
  EXPECT_EQ(status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("job_id 1: job for a job that is open"),
            std::string::npos)
      << status.error_message();
  ExpectCorrect(got[1], first);
  EXPECT_EQ(executor_->batches(), 1) << "the duplicate must not run";
}

// Issue 11, defect 3: a stray end_of_job after the job ended gave its id a
// second JobEnd.
TEST_F(GemmStreamReactorTest, StrayEndOfJobAfterTheJobBreaksTheStream) {
  executor_->Open();
  const Job job(Problem(5, 6, 7), 121);
  RawStream stream(stub_.get());
  ASSERT_TRUE(
      stream.Write(wire::EncodeWholeJob(1, job.Params(), job.Operands())));
  v1::StreamRequest stray;
  stray.set_job_id(1);
  stray.set_end_of_job(true);
  ASSERT_TRUE(stream.WritePart(stray));
  std::map<uint64_t, Received> got;
  const grpc::Status status =
      stream.Finish(&got, {{1, job.problem.c_elements()}});
  EXPECT_EQ(status.error_code(), grpc::INVALID_ARGUMENT);
  ExpectCorrect(got[1], job);
}

// A failed job's id may start a new job before the old one's end_of_job
// (its JobEnd is out); the old job's stray parts are ignored till then.
TEST_F(GemmStreamReactorTest, AFailedJobsIdMayStartANewJob) {
  executor_->Open();
  const Job job(Problem(6, 6, 6), 131);
  RawStream stream(stub_.get());
  v1::StreamRequest bad;
  bad.set_job_id(4);
  *bad.mutable_params() = job.Params();
  bad.mutable_params()->set_m(0);  // invalid: fails the job
  ASSERT_TRUE(stream.WritePart(bad));
  v1::StreamRequest part;
  part.set_job_id(4);
  part.set_operand(v1::OPERAND_A);
  ASSERT_TRUE(stream.WritePart(part, "abcd"));  // ignored
  // Inline, so that the harness sees no chunk after the first JobEnd.
  ASSERT_TRUE(stream.Write(
      wire::EncodeWholeJob(4, job.Params(1 << 20), job.Operands())));
  std::map<uint64_t, Received> got;
  const grpc::Status status =
      stream.Finish(&got, {{4, job.problem.c_elements()}});
  EXPECT_TRUE(status.ok()) << status.error_message();
  // The failed job's JobEnd, then the new job's.
  EXPECT_EQ(got[4].ends, 2);
  EXPECT_EQ(got[4].end.code(), 0) << got[4].end.message();
  EXPECT_LE(RelativeFrobeniusError(got[4].c.data(), job.want), kTolerance);
}

TEST_F(GemmStreamReactorTest, StreamClosedBeforeEndOfJob) {
  const Job job(Problem(4, 4, 4), 61);
  RawStream stream(stub_.get());
  v1::StreamRequest first;
  first.set_job_id(4);
  *first.mutable_params() = job.Params();
  first.set_operand(v1::OPERAND_A);
  ASSERT_TRUE(stream.WritePart(first, job.Bytes(job.a)));
  std::map<uint64_t, Received> got;
  ASSERT_TRUE(stream.Finish(&got, {}).ok());
  EXPECT_EQ(got[4].ends, 1);
  EXPECT_EQ(got[4].end.code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(got[4].end.message().find("stream closed before"),
            std::string::npos)
      << got[4].end.message();
}

TEST_F(GemmStreamReactorTest, ManyPipelinedJobsEachEndOnce) {
  executor_->Open();
  std::vector<std::unique_ptr<Job>> jobs;
  std::map<uint64_t, uint64_t> c_elements;
  RawStream stream(stub_.get());
  for (uint64_t id = 100; id < 140; ++id) {
    const uint32_t i = static_cast<uint32_t>(id - 100);
    jobs.push_back(std::make_unique<Job>(
        Problem(5 + i % 7, 3 + i % 5, 2 + i % 11, i % 3 == 0 ? 0.5f : 0.0f,
                i % 2 == 1, i % 4 == 1),
        id));
    const Job& job = *jobs.back();
    c_elements[id] = job.problem.c_elements();
    if (i % 2 == 0) {
      ASSERT_TRUE(stream.Write(wire::EncodeWholeJob(
          id, job.Params(i % 4 == 0 ? 1 << 20 : 0), job.Operands())));
    } else {
      SendChunked(stream, id, job, 40);
    }
  }
  std::map<uint64_t, Received> got;
  ASSERT_TRUE(stream.Finish(&got, c_elements).ok());
  EXPECT_EQ(got.size(), jobs.size());
  for (uint64_t id = 100; id < 140; ++id) {
    SCOPED_TRACE(id);
    ExpectCorrect(got[id], *jobs[id - 100]);
  }
}

}  // namespace
}  // namespace gemm::server::stream_test
