// The fixture of the JobStream tests (job_stream_test*.cc): a scripted
// gemm.v1.GemmService in this process on a real loopback port, which
// reassembles each job the client sends (proto/wire_codec.h) and sends back
// what a per-test Script says (chunks, inline results, errors, silence, the
// end of the stream); jobs whose outputs are poisoned with NaN and followed
// by a guard region.
//
// Thread-safety: one test thread drives a fixture; the scripted service
// runs on gRPC's threads.
//
//   TEST_F(JobStreamTest, X) {
//     StartServer([](const ReceivedJob& job, int) {
//       return std::vector<Reply>{End(job, ResultOf(job))};
//     });
//     auto stream = Open();
//   }
#ifndef GEMM_CLIENT_LIB_JOB_STREAM_TEST_FIXTURE_H_
#define GEMM_CLIENT_LIB_JOB_STREAM_TEST_FIXTURE_H_

#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/lib/job_stream.h"
#include "common/reference_gemm.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/wire_codec.h"

namespace gemm::client::stream_test {

inline constexpr char kStreamMethod[] = "/gemm.v1.GemmService/GemmStream";
inline constexpr float kGuard = 12345.0f;
inline constexpr size_t kGuardFloats = 64;

// A job as the scripted server received it.
struct ReceivedJob {
  uint64_t id = 0;
  GemmProblem problem;
  std::string a, b, c;  // operand bytes
};

// One message (or the end of the call) the scripted server sends.
struct Reply {
  enum class Kind { kChunk, kEnd, kFinish } kind = Kind::kEnd;
  uint64_t job_id = 0;
  uint64_t offset = 0;  // kChunk
  std::string bytes;    // kChunk: the data; kEnd: JobEnd.c
  absl::StatusCode code = absl::StatusCode::kOk;  // kEnd
  std::string message;                            // kEnd
  grpc::Status status;                            // kFinish
};

// Called once per job whose every part has arrived, in arrival order (`n`
// counts from 0); returns what to send back.
using Script = std::function<std::vector<Reply>(const ReceivedJob& job, int n)>;

// The right C of a received job, as bytes.
inline std::string ResultOf(const ReceivedJob& job) {
  const std::vector<double> want = ReferenceGemm(
      job.problem, reinterpret_cast<const float*>(job.a.data()),
      reinterpret_cast<const float*>(job.b.data()),
      job.c.empty() ? nullptr : reinterpret_cast<const float*>(job.c.data()));
  std::vector<float> c(want.begin(), want.end());
  return std::string(reinterpret_cast<const char*>(c.data()), 4 * c.size());
}

inline Reply Chunk(const ReceivedJob& job, uint64_t offset, std::string bytes) {
  return {.kind = Reply::Kind::kChunk,
          .job_id = job.id,
          .offset = offset,
          .bytes = std::move(bytes)};
}

inline Reply End(const ReceivedJob& job, std::string inline_c = "") {
  return {.kind = Reply::Kind::kEnd, .job_id = job.id, .bytes = inline_c};
}

inline Reply Fail(const ReceivedJob& job, absl::StatusCode code,
                  std::string message) {
  return {.kind = Reply::Kind::kEnd,
          .job_id = job.id,
          .code = code,
          .message = std::move(message)};
}

inline Reply FinishCall(grpc::Status status) {
  return {.kind = Reply::Kind::kFinish, .status = std::move(status)};
}

// The right result in three chunks cut at odd byte offsets, then the end.
inline std::vector<Reply> InThreeChunks(const ReceivedJob& job) {
  const std::string c = ResultOf(job);
  const size_t first = std::min<size_t>(7, c.size());
  const size_t second = std::min<size_t>(first + 50, c.size());
  return {Chunk(job, 0, c.substr(0, first)),
          Chunk(job, first, c.substr(first, second - first)),
          Chunk(job, second, c.substr(second)), End(job)};
}

inline grpc::ByteBuffer Encode(const Reply& reply) {
  if (reply.kind == Reply::Kind::kChunk) {
    auto owner = std::make_shared<std::string>(reply.bytes);
    return wire::EncodeResultChunk(reply.job_id, reply.offset, owner->data(),
                                   owner->size(), owner);
  }
  v1::StreamResponse response;
  response.set_job_id(reply.job_id);
  v1::JobEnd* end = response.mutable_end();
  end->set_code(static_cast<int>(reply.code));
  end->set_message(reply.message);
  if (reply.code == absl::StatusCode::kOk) {
    end->mutable_timing()->set_kernel("scripted");
    end->mutable_timing()->set_compute_ms(1.5);
  }
  end->set_c(reply.bytes);
  return wire::EncodeMessage(response);
}

// The server side of one GemmStream call: reassembles jobs, runs the
// script, writes its replies one at a time, and finishes when the script
// says so, once the client has half-closed and every job has its JobEnd,
// or when the call is cancelled.
class ScriptedStream final : public grpc::ServerGenericBidiReactor {
 public:
  explicit ScriptedStream(const Script* script) : script_(script) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      {
        absl::MutexLock lock(&mu_);
        reads_done_ = true;
      }
      Pump();
      return;
    }
    wire::DecodedRequest in;
    EXPECT_TRUE(wire::DecodeStreamRequest(request_, &in).ok());
    std::vector<Reply> replies;
    if (Assemble(in)) {
      {
        absl::MutexLock lock(&mu_);
        ++open_jobs_;
      }
      replies = (*script_)(jobs_[in.header.job_id()], completed_++);
      jobs_.erase(in.header.job_id());
    }
    bool finishing = false;
    {
      absl::MutexLock lock(&mu_);
      for (Reply& reply : replies) {
        if (reply.kind == Reply::Kind::kFinish) {
          finish_ = reply.status;
          finishing = true;
          break;
        }
        if (reply.kind == Reply::Kind::kEnd) --open_jobs_;
        to_write_.push_back(Encode(reply));
      }
    }
    Pump();
    if (!finishing) StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) to_write_.clear();
    }
    Pump();
  }

  // The client's deadline passed or it cancelled: end without replying.
  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
    }
    Pump();
  }

  void OnDone() override { delete this; }

 private:
  // Adds a message to its job; true once the job is complete.
  bool Assemble(const wire::DecodedRequest& in) {
    ReceivedJob& job = jobs_[in.header.job_id()];
    job.id = in.header.job_id();
    const v1::GemmParams* params = nullptr;
    if (in.has_job) params = &in.job.params();
    if (in.header.has_params()) params = &in.header.params();
    if (params != nullptr) {
      job.problem = {params->m(),       params->n(),       params->k(),
                     params->trans_a(), params->trans_b(), params->alpha(),
                     params->beta()};
      job.a.resize(4 * job.problem.a_elements());
      job.b.resize(4 * job.problem.b_elements());
      if (job.problem.beta != 0) job.c.resize(4 * job.problem.c_elements());
    }
    if (in.has_job) {
      in.job_a.CopyTo(job.a.data());
      in.job_b.CopyTo(job.b.data());
      in.job_c.CopyTo(job.c.data());
      return true;
    }
    if (in.data.size > 0) {
      std::string* operand = in.header.operand() == v1::OPERAND_A   ? &job.a
                             : in.header.operand() == v1::OPERAND_B ? &job.b
                                                                    : &job.c;
      EXPECT_LE(in.header.offset() + in.data.size, operand->size());
      in.data.CopyTo(operand->data() + in.header.offset());
    }
    return in.header.end_of_job();
  }

  // Starts the next write, or ends the call once nothing is left to write.
  // Like the client, it never starts an operation with mu_ held: gRPC may
  // run the reaction on this thread before the call returns.
  void Pump() {
    grpc::ByteBuffer* message = nullptr;
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || finished_) return;
      if (!to_write_.empty()) {
        // Kept until the call ends: a message must outlive its write.
        written_.push_back(std::move(to_write_.front()));
        to_write_.pop_front();
        message = &written_.back();
        writing_ = true;
      } else if (finish_.has_value() || cancelled_ ||
                 (reads_done_ && open_jobs_ == 0)) {
        // Like a real server, it waits for its open jobs after the client
        // half-closes.
        finished_ = true;
        finish = finish_.value_or(grpc::Status::OK);
      }
    }
    if (message != nullptr) StartWrite(message);
    if (finish.has_value()) Finish(*finish);
  }

  const Script* const script_;
  grpc::ByteBuffer request_;
  std::map<uint64_t, ReceivedJob> jobs_;  // used by the read reaction only
  int completed_ = 0;

  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> to_write_ ABSL_GUARDED_BY(mu_);
  std::deque<grpc::ByteBuffer> written_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int open_jobs_ ABSL_GUARDED_BY(mu_) = 0;  // complete, without a JobEnd
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> finish_ ABSL_GUARDED_BY(mu_);
};

class ScriptedService final : public grpc::CallbackGenericService {
 public:
  explicit ScriptedService(Script script) : script_(std::move(script)) {}

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    if (context->method() != kStreamMethod) {
      return grpc::CallbackGenericService::CreateReactor(context);
    }
    return new ScriptedStream(&script_);
  }

 private:
  const Script script_;
};

// One job's operands and its poisoned output with a guard region behind.
struct TestJob {
  explicit TestJob(GemmProblem p, uint64_t seed) : problem(p) {
    a.resize(problem.a_elements());
    b.resize(problem.b_elements());
    FillRandom(a.data(), a.size(), seed);
    FillRandom(b.data(), b.size(), seed + 1);
    if (problem.beta != 0) {
      c.resize(problem.c_elements());
      FillRandom(c.data(), c.size(), seed + 2);
    }
    out.assign(problem.c_elements(), std::numeric_limits<float>::quiet_NaN());
    out.insert(out.end(), kGuardFloats, kGuard);
    want = ReferenceGemm(problem, a.data(), b.data(),
                         c.empty() ? nullptr : c.data());
  }

  GemmArgs args() const {
    return {.problem = problem,
            .a = a.data(),
            .b = b.data(),
            .c = c.empty() ? nullptr : c.data()};
  }
  double Error() const { return RelativeFrobeniusError(out.data(), want); }
  bool Untouched() const {
    for (size_t i = 0; i < problem.c_elements(); ++i) {
      if (!std::isnan(out[i])) return false;
    }
    return GuardIntact();
  }
  bool GuardIntact() const {
    for (size_t i = problem.c_elements(); i < out.size(); ++i) {
      if (out[i] != kGuard) return false;
    }
    return true;
  }

  GemmProblem problem;
  std::vector<float> a, b, c, out;
  std::vector<double> want;
  // Filled by the callback.
  int calls = 0;
  absl::StatusOr<v1::Timing> result = absl::UnknownError("no callback");
};

class JobStreamTest : public ::testing::Test {
 protected:
  void StartServer(Script script) {
    service_ = std::make_unique<ScriptedService>(std::move(script));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterCallbackGenericService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials());
    stub_ = std::make_unique<grpc::GenericStub>(channel_);
  }

  std::unique_ptr<JobStream> Open(JobStream::Options options = {},
                                  RetryScheduler* retries = nullptr) {
    return JobStream::Open(stub_.get(), "scripted", options, tracker_, retries);
  }

  // Submits the job; its callback records the outcome (counting calls).
  void Submit(JobStream* stream, TestJob* job) {
    stream->Submit(job->args(), job->out.data(),
                   [job](absl::StatusOr<v1::Timing> result) {
                     ++job->calls;
                     job->result = std::move(result);
                   });
  }

  void TearDown() override {
    tracker_->WaitForIdle();
    stub_.reset();
    channel_.reset();
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() +
                        std::chrono::seconds(1));
    }
  }

  std::unique_ptr<ScriptedService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::GenericStub> stub_;
  std::shared_ptr<CallTracker> tracker_ = std::make_shared<CallTracker>();
};

}  // namespace gemm::client::stream_test

#endif  // GEMM_CLIENT_LIB_JOB_STREAM_TEST_FIXTURE_H_
