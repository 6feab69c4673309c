// The fixture of the GemmStream tests (gemm_stream_reactor_test*.cc):
// GemmServiceImpl with the real CpuExecutor and BatchScheduler on a loopback
// port behind a gate (GatedExecutor), jobs with their float64 reference
// (Job), and one raw GemmStream call driven synchronously (RawStream).
//
// Thread-safety: one test thread drives a fixture; GatedExecutor is called
// from the scheduler's workers as well.
//
//   TEST_F(GemmStreamReactorTest, X) {
//     executor_->Open();
//     RawStream stream(stub_.get());
//     ...
//   }
#ifndef GEMM_SERVER_RPC_GEMM_STREAM_REACTOR_TEST_FIXTURE_H_
#define GEMM_SERVER_RPC_GEMM_STREAM_REACTOR_TEST_FIXTURE_H_

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
#include "server/cpu/cpu_executor.h"
#include "server/rpc/gemm_service.h"
#include "server/scheduling/batch_scheduler.h"
#include "server/testing/blocking_generic_call.h"

namespace gemm::server::stream_test {

inline constexpr char kMethod[] = "/gemm.v1.GemmService/GemmStream";
inline constexpr double kTolerance = 1e-5;
// Small, so that results span several chunks.
inline constexpr uint64_t kResultChunkBytes = 1000;

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

inline GemmProblem Problem(uint32_t m, uint32_t n, uint32_t k,
                           float beta = 0.0f, bool trans_a = false,
                           bool trans_b = false) {
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

inline void ExpectCorrect(const Received& got, const Job& job) {
  EXPECT_EQ(got.ends, 1);
  EXPECT_EQ(got.end.code(), 0) << got.end.message();
  ASSERT_EQ(got.c.size(), job.want.size());
  EXPECT_LE(RelativeFrobeniusError(got.c.data(), job.want), kTolerance);
}

}  // namespace gemm::server::stream_test

#endif  // GEMM_SERVER_RPC_GEMM_STREAM_REACTOR_TEST_FIXTURE_H_
