// GemmStream in this process: GemmServiceImpl with the real CpuExecutor and
// BatchScheduler on a loopback port, driven with raw messages
// (proto/wire_codec.h) over a grpc::GenericStub, so that each test can send
// exactly the parts it means to, including malformed ones. Results are
// compared with a float64 reference; outputs start poisoned (NaN).
#include "server/gemm_stream_reactor.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/reference_gemm.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/gemm.grpc.pb.h"
#include "proto/wire_codec.h"
#include "server/batch_scheduler.h"
#include "server/blocking_generic_call.h"
#include "server/cpu_executor.h"
#include "server/gemm_service.h"

namespace gemm::server {
namespace {

constexpr char kMethod[] = "/gemm.v1.GemmService/GemmStream";
constexpr double kTolerance = 1e-5;
// Small, so that results span several chunks.
constexpr uint64_t kResultChunkBytes = 1000;

// Holds every batch until Open(), so that tests can keep jobs queued.
class GatedExecutor final : public ForwardingExecutor {
 public:
  explicit GatedExecutor(std::unique_ptr<Executor> inner)
      : ForwardingExecutor(std::move(inner)) {}
  absl::Status Execute(const Batch& batch) override {
    {
      absl::MutexLock lock(&mu_);
      held_ = batch.front();
    }
    batches_.fetch_add(1);
    open_.WaitForNotification();
    return ForwardingExecutor::Execute(batch);
  }
  void Open() {
    if (!open_.HasBeenNotified()) open_.Notify();
  }
  int batches() const { return batches_.load(); }
  // Whether the first job of the last batch given has been cancelled.
  bool HeldJobCancelled() {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<GemmJob> held = held_.lock();
    return held != nullptr && held->IsCancelled();
  }

 private:
  absl::Notification open_;
  std::atomic<int> batches_{0};
  absl::Mutex mu_;
  // Weak: jobs must not outlive the service (their budget claims).
  std::weak_ptr<GemmJob> held_ ABSL_GUARDED_BY(mu_);
};

// A job's operands, with its float64 reference result.
struct Job {
  Job(GemmProblem p, uint64_t seed) : problem(p) {
    a.resize(problem.a_elements());
    b.resize(problem.b_elements());
    c.resize(problem.c_elements());
    FillRandom(a.data(), a.size(), seed);
    FillRandom(b.data(), b.size(), seed + 1);
    FillRandom(c.data(), c.size(), seed + 2);
    want = ReferenceGemm(problem, a.data(), b.data(),
                         problem.beta != 0.0f ? c.data() : nullptr);
  }
  v1::GemmParams Params(uint64_t inline_result_max_bytes = 0) const {
    v1::GemmParams params;
    params.set_m(problem.m);
    params.set_n(problem.n);
    params.set_k(problem.k);
    params.set_trans_a(problem.trans_a);
    params.set_trans_b(problem.trans_b);
    params.set_alpha(problem.alpha);
    params.set_beta(problem.beta);
    params.set_inline_result_max_bytes(inline_result_max_bytes);
    return params;
  }
  absl::string_view Bytes(const std::vector<float>& v) const {
    return absl::string_view(reinterpret_cast<const char*>(v.data()),
                             4 * v.size());
  }
  wire::Operands Operands() const {
    return {Bytes(a), Bytes(b), problem.beta != 0.0f ? Bytes(c) : ""};
  }

  GemmProblem problem;
  std::vector<float> a, b, c;
  std::vector<double> want;
};

GemmProblem Problem(uint32_t m, uint32_t n, uint32_t k, float beta = 0.0f,
                    bool trans_a = false, bool trans_b = false) {
  GemmProblem p{m, n, k, trans_a, trans_b};
  p.alpha = 1.25f;
  p.beta = beta;
  return p;
}

// Everything a job got back on the stream.
struct Received {
  int ends = 0;
  v1::JobEnd end;        // without c
  std::vector<float> c;  // reassembled from chunks or JobEnd.c; NaN first
  int chunks = 0;
};

// One GemmStream call, driven synchronously: write the parts, half-close,
// then read every response until the server ends the call.
class RawStream {
 public:
  explicit RawStream(grpc::GenericStub* stub,
                     absl::Duration timeout = absl::InfiniteDuration())
      : call_(stub, kMethod, timeout) {}

  bool Write(const grpc::ByteBuffer& message) { return call_.Write(message); }
  // Bytes that need not be a well-formed message.
  bool WriteBytes(const std::string& bytes) {
    grpc::Slice slice(bytes);
    return Write(grpc::ByteBuffer(&slice, 1));
  }
  // A StreamRequest with `data` (a piece of an operand, or nothing).
  bool WritePart(const v1::StreamRequest& header, absl::string_view data = "") {
    return Write(wire::EncodeStreamRequest(header, data));
  }
  void Cancel() { call_.Cancel(); }

  // Half-closes, reads until the server ends the call, and returns its
  // status; `jobs` gets what each job id received (C is `c_elements` long).
  grpc::Status Finish(std::map<uint64_t, Received>* jobs,
                      const std::map<uint64_t, uint64_t>& c_elements) {
    call_.WritesDone();
    grpc::ByteBuffer buffer;
    while (call_.Read(&buffer)) {
      wire::DecodedResponse response;
      EXPECT_TRUE(wire::DecodeStreamResponse(buffer, &response).ok());
      Received& got = (*jobs)[response.job_id];
      if (got.c.empty()) {
        auto it = c_elements.find(response.job_id);
        got.c.assign(it == c_elements.end() ? 0 : it->second,
                     std::numeric_limits<float>::quiet_NaN());
      }
      char* out = reinterpret_cast<char*>(got.c.data());
      if (response.has_chunk) {
        ++got.chunks;
        EXPECT_EQ(got.ends, 0) << "a chunk after the job's end";
        if (response.chunk_offset + response.data.size > 4 * got.c.size()) {
          ADD_FAILURE() << "job " << response.job_id << ": a chunk past C";
          continue;
        }
        response.data.CopyTo(out + response.chunk_offset);
      }
      if (response.has_end) {
        ++got.ends;
        got.end = response.end;
        if (response.data.size > 0) {
          EXPECT_EQ(response.data.size, 4 * got.c.size());
          response.data.CopyTo(out);
        }
      }
    }
    return call_.Finish();
  }

 private:
  BlockingGenericCall call_;
};

class GemmStreamReactorTest : public ::testing::Test {
 protected:
  // What a test's server runs with; tests of flow control shrink them.
  virtual ServiceLimits Limits() const { return ServiceLimits(); }
  virtual BatchScheduler::Options Batching() const { return {}; }

  void SetUp() override {
    auto cpu = CpuExecutor::Create({.threads = 1});
    ASSERT_TRUE(cpu.ok());
    executor_ = std::make_unique<GatedExecutor>(std::move(*cpu));
    auto scheduler = BatchScheduler::Create(Batching(), executor_.get());
    ASSERT_TRUE(scheduler.ok());
    scheduler_ = std::move(*scheduler);
    GemmServiceImpl::Options options;
    options.limits = Limits();
    options.limits.result_chunk_bytes = kResultChunkBytes;
    options.version = "test";
    service_ = std::make_unique<GemmServiceImpl>(options, executor_.get(),
                                                 scheduler_.get());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(service_.get());
    builder.RegisterCallbackGenericService(service_->unary_calls());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                   grpc::InsecureChannelCredentials());
    stub_ = std::make_unique<grpc::GenericStub>(channel_);
  }
  void TearDown() override {
    executor_->Open();
    scheduler_->StopAccepting();
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(5));
    scheduler_->Stop();
    server_->Wait();
  }

  // Sends `job` as `id`: params with no data, then A, B and (when beta is
  // not 0) C in chunks of `chunk_bytes`, the last message ending the job.
  static void SendChunked(RawStream& stream, uint64_t id, const Job& job,
                          uint64_t chunk_bytes) {
    v1::StreamRequest first;
    first.set_job_id(id);
    *first.mutable_params() = job.Params();
    ASSERT_TRUE(stream.WritePart(first));
    std::vector<std::pair<v1::Operand, absl::string_view>> operands = {
        {v1::OPERAND_A, job.Bytes(job.a)}, {v1::OPERAND_B, job.Bytes(job.b)}};
    if (job.problem.beta != 0.0f) {
      operands.push_back({v1::OPERAND_C, job.Bytes(job.c)});
    }
    for (size_t o = 0; o < operands.size(); ++o) {
      const auto& [operand, bytes] = operands[o];
      for (uint64_t offset = 0; offset < bytes.size(); offset += chunk_bytes) {
        v1::StreamRequest part;
        part.set_job_id(id);
        part.set_operand(operand);
        part.set_offset(offset);
        const bool last =
            o + 1 == operands.size() && offset + chunk_bytes >= bytes.size();
        part.set_end_of_job(last);
        ASSERT_TRUE(stream.WritePart(part, bytes.substr(offset, chunk_bytes)));
      }
    }
  }

  std::unique_ptr<GatedExecutor> executor_;
  std::unique_ptr<BatchScheduler> scheduler_;
  std::unique_ptr<GemmServiceImpl> service_;
  // Info's counters.
  v1::ServerStats Stats() {
    grpc::ClientContext context;
    v1::InfoResponse info;
    EXPECT_TRUE(v1::GemmService::NewStub(channel_)
                    ->Info(&context, v1::InfoRequest(), &info)
                    .ok());
    return info.stats();
  }

  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::GenericStub> stub_;
  int port_ = 0;
};

void ExpectCorrect(const Received& got, const Job& job) {
  EXPECT_EQ(got.ends, 1);
  EXPECT_EQ(got.end.code(), 0) << got.end.message();
  ASSERT_EQ(got.c.size(), job.want.size());
  EXPECT_LE(RelativeFrobeniusError(got.c.data(), job.want), kTolerance);
}

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

TEST_F(GemmStreamReactorTest, CancelledStreamDropsItsQueuedJobs) {
  // Gate closed: the first job runs and waits there, the second queues.
  const Job first(Problem(16, 16, 16), 71);
  const Job second(Problem(24, 16, 16), 81);
  RawStream stream(stub_.get());
  ASSERT_TRUE(
      stream.Write(wire::EncodeWholeJob(1, first.Params(), first.Operands())));
  ASSERT_TRUE(stream.Write(
      wire::EncodeWholeJob(2, second.Params(), second.Operands())));
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while ((executor_->batches() < 1 || scheduler_->queued() < 1) &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(executor_->batches(), 1);
  ASSERT_EQ(scheduler_->queued(), 1u);
  stream.Cancel();
  std::map<uint64_t, Received> got;
  EXPECT_EQ(stream.Finish(&got, {}).error_code(), grpc::StatusCode::CANCELLED);
  // The server has seen the cancellation once the reactor cancelled its
  // jobs (the running one included).
  while (!executor_->HeldJobCancelled() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(executor_->HeldJobCancelled());
  executor_->Open();
  v1::ServerStats stats = Stats();
  while (stats.jobs_ok() + stats.jobs_failed() < 2 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
    stats = Stats();
  }
  // The running job finished, the queued one was dropped unrun; neither
  // result reached the client, so both count as failed.
  EXPECT_EQ(stats.jobs_ok(), 0u);
  EXPECT_EQ(stats.jobs_failed(), 2u);
  EXPECT_EQ(executor_->batches(), 1);
}

// A job's claim on the in-flight budget: A, B and C, and the bookkeeping.
constexpr uint64_t kFlowJobBytes = 3 * 16 * 16 * 4 + kJobBookkeepingBytes;

// Room for three 16^3 jobs in flight, and two in the queue.
class FlowControlTest : public GemmStreamReactorTest {
 protected:
  ServiceLimits Limits() const override {
    ServiceLimits limits;
    limits.max_inflight_bytes = 3 * kFlowJobBytes;
    limits.max_job_bytes = 3 * kFlowJobBytes;
    return limits;
  }
  BatchScheduler::Options Batching() const override {
    BatchScheduler::Options batching;
    batching.max_queued_jobs = 2;
    batching.max_batch_size = 1;
    return batching;
  }
  void WaitForBatches(int n) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (executor_->batches() < n && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_GE(executor_->batches(), n);
  }
};

// Issue 11, defect 6: pipelined jobs beyond the budget or the queue came
// back UNAVAILABLE; the stream now waits, and every job runs.
TEST_F(FlowControlTest, AFullBudgetAndQueueSlowTheStreamDown) {
  std::vector<std::unique_ptr<Job>> jobs;
  std::map<uint64_t, uint64_t> c_elements;
  RawStream stream(stub_.get());
  for (uint64_t id = 1; id <= 12; ++id) {
    jobs.push_back(std::make_unique<Job>(Problem(16, 16, 16), 200 + id));
    c_elements[id] = jobs.back()->problem.c_elements();
    ASSERT_TRUE(stream.Write(wire::EncodeWholeJob(id, jobs.back()->Params(),
                                                  jobs.back()->Operands())));
  }
  WaitForBatches(1);
  // One job held in the executor, two queued: the budget (3 jobs) is full
  // and the stream reads no more. Let it all through.
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(executor_->batches(), 1);
  executor_->Open();
  std::map<uint64_t, Received> got;
  const grpc::Status status = stream.Finish(&got, c_elements);
  EXPECT_TRUE(status.ok()) << status.error_message();
  for (uint64_t id = 1; id <= 12; ++id) {
    SCOPED_TRACE(id);
    ExpectCorrect(got[id], *jobs[id - 1]);
  }
  EXPECT_EQ(service_->rejected_jobs(), 0u);
}

// With a job of its own half received, a stream cannot wait for budget
// (that job needs its later messages): the new job fails with UNAVAILABLE.
TEST_F(FlowControlTest, AStreamWithAHalfReceivedJobDoesNotWaitOnItself) {
  const Job half(Problem(16, 16, 16), 301);
  const Job running(Problem(16, 16, 16), 311);
  const Job third(Problem(16, 16, 16), 321);
  const Job fourth(Problem(16, 16, 16), 331);
  RawStream stream(stub_.get());
  v1::StreamRequest first;
  first.set_job_id(1);
  *first.mutable_params() = half.Params();
  ASSERT_TRUE(stream.WritePart(first));  // holds a third of the budget
  ASSERT_TRUE(stream.Write(
      wire::EncodeWholeJob(2, running.Params(), running.Operands())));
  WaitForBatches(1);  // job 2 holds the second third, in the executor
  ASSERT_TRUE(
      stream.Write(wire::EncodeWholeJob(3, third.Params(), third.Operands())));
  // The budget is full now, and job 1 is half received.
  ASSERT_TRUE(stream.Write(
      wire::EncodeWholeJob(4, fourth.Params(), fourth.Operands())));
  v1::StreamRequest a;
  a.set_job_id(1);
  a.set_operand(v1::OPERAND_A);
  ASSERT_TRUE(stream.WritePart(a, half.Bytes(half.a)));
  v1::StreamRequest b;
  b.set_job_id(1);
  b.set_operand(v1::OPERAND_B);
  b.set_end_of_job(true);
  ASSERT_TRUE(stream.WritePart(b, half.Bytes(half.b)));
  // Job 4's answer is decided while job 2 still holds its budget.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (service_->rejected_jobs() < 1 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(service_->rejected_jobs(), 1u);
  executor_->Open();
  std::map<uint64_t, Received> got;
  const grpc::Status status =
      stream.Finish(&got, {{1, half.problem.c_elements()},
                           {2, running.problem.c_elements()},
                           {3, third.problem.c_elements()}});
  EXPECT_TRUE(status.ok()) << status.error_message();
  ExpectCorrect(got[1], half);
  ExpectCorrect(got[2], running);
  ExpectCorrect(got[3], third);
  EXPECT_EQ(got[4].ends, 1);
  EXPECT_EQ(got[4].end.code(), grpc::UNAVAILABLE) << got[4].end.message();
}

// Issue 11, defect 7: shutdown ends streams once their accepted jobs have
// answered, jobs not accepted get UNAVAILABLE, and an idle stream ends at
// once instead of holding shutdown for the whole grace period.
TEST_F(GemmStreamReactorTest, DrainEndsStreamsOnceTheirAcceptedJobsAnswer) {
  const Job accepted(Problem(12, 10, 8), 401);
  const Job partial(Problem(12, 10, 8), 411);
  RawStream busy(stub_.get());
  RawStream idle(stub_.get());
  ASSERT_TRUE(busy.Write(
      wire::EncodeWholeJob(1, accepted.Params(), accepted.Operands())));
  v1::StreamRequest first;
  first.set_job_id(2);
  *first.mutable_params() = partial.Params();
  ASSERT_TRUE(busy.WritePart(first));
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (executor_->batches() < 1 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(executor_->batches(), 1);
  // Job 2's params must have been read before the drain.
  absl::SleepFor(absl::Milliseconds(50));
  scheduler_->StopAccepting();
  service_->Drain();

  std::map<uint64_t, Received> idle_got;
  const absl::Time idle_start = absl::Now();
  const grpc::Status idle_status = idle.Finish(&idle_got, {});
  EXPECT_EQ(idle_status.error_code(), grpc::UNAVAILABLE)
      << idle_status.error_message();
  EXPECT_LT(absl::Now() - idle_start, absl::Seconds(5));
  EXPECT_TRUE(idle_got.empty());

  executor_->Open();
  std::map<uint64_t, Received> got;
  const grpc::Status status =
      busy.Finish(&got, {{1, accepted.problem.c_elements()}});
  EXPECT_EQ(status.error_code(), grpc::UNAVAILABLE) << status.error_message();
  ExpectCorrect(got[1], accepted);
  EXPECT_EQ(got[2].ends, 1);
  EXPECT_EQ(got[2].end.code(), grpc::UNAVAILABLE) << got[2].end.message();
  EXPECT_NE(got[2].end.message().find("shutting down"), std::string::npos);
}

// Room for three 16^3 jobs in flight, and jobs being received expire after
// 300 ms without data.
class StallTest : public FlowControlTest {
 protected:
  ServiceLimits Limits() const override {
    ServiceLimits limits = FlowControlTest::Limits();
    limits.job_stall_timeout = absl::Milliseconds(300);
    return limits;
  }
};

// Issue 12, item 1: a few params-only messages reserved the whole budget
// for bytes that never came, for as long as their stream stayed open, and
// every other client waited (or, on unary calls, got UNAVAILABLE).
TEST_F(StallTest, JobsDeclaredAndNeverSentGiveTheirBudgetBack) {
  executor_->Open();
  const Job job(Problem(16, 16, 16), 501);
  RawStream hog(stub_.get());
  for (uint64_t id = 1; id <= 3; ++id) {
    v1::StreamRequest first;
    first.set_job_id(id);
    *first.mutable_params() = job.Params();
    ASSERT_TRUE(hog.WritePart(first));  // the budget is full after three
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (service_->inflight_bytes() < 3 * kFlowJobBytes &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(service_->inflight_bytes(), 3 * kFlowJobBytes);
  // Without expiry this stream would wait for room to the deadline.
  RawStream victim(stub_.get(), absl::Seconds(20));
  ASSERT_TRUE(
      victim.Write(wire::EncodeWholeJob(1, job.Params(), job.Operands())));
  std::map<uint64_t, Received> got;
  const grpc::Status status =
      victim.Finish(&got, {{1, job.problem.c_elements()}});
  EXPECT_TRUE(status.ok()) << status.error_message();
  ExpectCorrect(got[1], job);
  // The hog's jobs ended with DEADLINE_EXCEEDED; a late part is ignored.
  v1::StreamRequest late;
  late.set_job_id(1);
  late.set_operand(v1::OPERAND_A);
  ASSERT_TRUE(hog.WritePart(late, job.Bytes(job.a)));
  std::map<uint64_t, Received> hog_got;
  const grpc::Status hog_status = hog.Finish(&hog_got, {});
  EXPECT_TRUE(hog_status.ok()) << hog_status.error_message();
  for (uint64_t id = 1; id <= 3; ++id) {
    SCOPED_TRACE(id);
    EXPECT_EQ(hog_got[id].ends, 1);
    EXPECT_EQ(hog_got[id].end.code(), grpc::DEADLINE_EXCEEDED);
    EXPECT_NE(hog_got[id].end.message().find("no data for"), std::string::npos)
        << hog_got[id].end.message();
  }
}

}  // namespace
}  // namespace gemm::server
