// Fuzz target of stream reassembly: a StreamSession (the GemmStream
// protocol) driven by a sequence of messages the input describes, against a
// real JobIntake, BatchScheduler and CPU executor with a small in-flight
// budget and queue, so that jobs fail, break the stream, wait for room and
// run. The input is read as operations: a params message, a data chunk, an
// end_of_job, a whole job, raw bytes, waiting for jobs to finish, draining
// the outbox, expiring stalled jobs, or a server drain. After the input, the
// client half-closes, every job finishes and the outbox is read out. The
// protocol's promises must hold: every job the session read the start of has
// exactly one JobEnd and no other id has one; no result chunk follows its job's
// end; the session settles with no job left; the call's status is OK,
// INVALID_ARGUMENT or UNAVAILABLE; a session waiting for room always gets
// it. Any violation aborts.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "proto/gemm.pb.h"
#include "proto/wire_codec.h"
#include "server/cpu/cpu_executor.h"
#include "server/rpc/job_intake.h"
#include "server/rpc/stream_session.h"
#include "server/scheduling/batch_scheduler.h"

namespace gemm::server {
namespace {

void Check(bool ok, const char* what, uint64_t id = 0) {
  if (ok) return;
  std::fprintf(stderr, "stream_session_fuzzer: %s (job_id %llu)\n", what,
               static_cast<unsigned long long>(id));
  std::abort();
}

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return size_ == 0; }
  uint8_t Byte() {
    if (size_ == 0) return 0;
    --size_;
    return *data_++;
  }
  std::string Bytes(size_t n) {
    n = std::min(n, size_);
    std::string out(reinterpret_cast<const char*>(data_), n);
    data_ += n;
    size_ -= n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

// The shared server side: one executor, scheduler and intake for all inputs.
struct Server {
  Server() {
    auto cpu = CpuExecutor::Create({.threads = 1});
    if (!cpu.ok()) std::abort();
    executor = std::move(*cpu);
    BatchScheduler::Options batching;
    batching.max_queued_jobs = 2;
    auto made = BatchScheduler::Create(batching, executor.get());
    if (!made.ok()) std::abort();
    scheduler = std::move(*made);
    JobIntake::Options options;
    // Room for a few of the largest jobs (4 x 4 x 4: 192 bytes).
    options.limits.max_dim = 4;
    options.limits.max_job_bytes = 600;
    options.limits.max_inflight_bytes = 600 + kJobBookkeepingBytes;
    options.limits.result_chunk_bytes = 24;
    intake =
        std::make_unique<JobIntake>(options, executor.get(), scheduler.get());
  }
  std::unique_ptr<Executor> executor;
  std::unique_ptr<BatchScheduler> scheduler;
  std::unique_ptr<JobIntake> intake;
};

// Floats (1.0) for operands: contents do not matter here.
std::string Floats(size_t bytes) {
  std::string out;
  const float one = 1.0f;
  while (out.size() < bytes) out.append(reinterpret_cast<const char*>(&one), 4);
  out.resize(bytes);
  return out;
}

v1::GemmParams Params(Reader& in) {
  v1::GemmParams params;
  const uint8_t shape = in.Byte();
  params.set_m(shape % 5);  // 0 is invalid
  params.set_n(1 + (shape >> 3) % 4);
  params.set_k((shape >> 5) % 5);
  params.set_alpha(1.0f);
  params.set_beta(in.Byte() % 2);
  params.set_inline_result_max_bytes(in.Byte() % 2 ? 64 : 0);
  return params;
}

class Harness {
 public:
  explicit Harness(Server* server)
      : server_(server),
        session_(
            server->intake.get(), {.result_chunk_bytes = 24}, JobIntake::Call(),
            [this](uint64_t id, bool inline_result, GemmJob& job,
                   absl::Status status) {
              absl::MutexLock lock(&mu_);
              session_.OnJobDone(id, inline_result, job, std::move(status));
            }) {}

  // Feeds one message; false once the session reads no more.
  bool Feed(const grpc::ByteBuffer& message) {
    // Whether it starts a job, as the session's own decoder sees it.
    wire::DecodedRequest decoded;
    const bool starts = wire::DecodeStreamRequest(message, &decoded).ok() &&
                        (decoded.has_job || decoded.header.has_params());
    absl::MutexLock lock(&mu_);
    uint64_t epoch = server_->intake->capacity_epoch();
    StreamSession::Next next = session_.OnMessage(message);
    if (starts && next != StreamSession::Next::kStopReading) {
      ++starts_[decoded.header.job_id()];
    }
    while (next == StreamSession::Next::kWaitForCapacity) {
      std::atomic<bool> woken{false};
      server_->intake->WaitForCapacity(epoch, [&woken] { woken = true; });
      const absl::Time give_up = absl::Now() + absl::Seconds(5);
      while (!woken) {
        DrainOutboxLocked();
        mu_.Unlock();
        absl::SleepFor(absl::Microseconds(50));
        mu_.Lock();
        Check(absl::Now() < give_up, "waited 5 s for room");
      }
      epoch = server_->intake->capacity_epoch();
      next = session_.RetryWaiting();
    }
    return next == StreamSession::Next::kRead;
  }

  void WaitForJobs() {
    absl::MutexLock lock(&mu_);
    const absl::Time give_up = absl::Now() + absl::Seconds(5);
    while (session_.jobs_running() > 0) {
      DrainOutboxLocked();
      mu_.Unlock();
      absl::SleepFor(absl::Microseconds(50));
      mu_.Lock();
      Check(absl::Now() < give_up, "a job did not finish in 5 s");
    }
    DrainOutboxLocked();
  }

  void DrainOutbox() {
    absl::MutexLock lock(&mu_);
    DrainOutboxLocked();
  }
  void ReadsDone() {
    absl::MutexLock lock(&mu_);
    session_.OnReadsDone();
  }
  void Drain() {
    absl::MutexLock lock(&mu_);
    session_.Drain();
  }
  // As if every job being received had stalled.
  void ExpireAll() {
    absl::MutexLock lock(&mu_);
    session_.ExpireStalled(absl::InfiniteFuture());
  }

  void CheckEnd() {
    WaitForJobs();
    absl::MutexLock lock(&mu_);
    Check(session_.Settled(), "not settled at the end");
    const absl::StatusCode code = session_.final_status().code();
    Check(code == absl::StatusCode::kOk ||
              code == absl::StatusCode::kInvalidArgument ||
              code == absl::StatusCode::kUnavailable,
          "unexpected final status");
    for (const auto& [id, n] : ends_) {
      Check(starts_.count(id) > 0 && starts_[id] == n,
            "JobEnds differ from the jobs started", id);
    }
    for (const auto& [id, n] : starts_) {
      Check(ends_.count(id) > 0 && ends_[id] == n,
            "a started job has no JobEnd", id);
    }
  }

 private:
  void DrainOutboxLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (!session_.outbox().empty()) {
      wire::DecodedResponse response;
      Check(
          wire::DecodeStreamResponse(session_.outbox().Next(), &response).ok(),
          "the outbox sent a malformed message");
      const uint64_t id = response.job_id;
      if (response.has_chunk) {
        Check(ends_[id] < starts_[id], "a chunk for a job that has ended", id);
      }
      if (response.has_end) ++ends_[id];
    }
  }

  Server* const server_;
  absl::Mutex mu_;
  StreamSession session_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, int> starts_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, int> ends_ ABSL_GUARDED_BY(mu_);
};

}  // namespace
}  // namespace gemm::server

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gemm::server;
  using gemm::v1::StreamRequest;
  namespace wire = gemm::wire;
  static Server* server = new Server();
  Harness harness(server);
  Reader in(data, size);
  bool reading = true;
  bool drained = false;
  while (reading && !in.empty()) {
    const uint8_t op = in.Byte();
    const uint64_t id = in.Byte() % 4;
    StreamRequest req;
    req.set_job_id(id);
    switch (op % 9) {
      case 0:  // params, maybe with data and end_of_job
      case 1: {
        *req.mutable_params() = Params(in);
        const uint8_t flags = in.Byte();
        std::string data;
        if (flags & 1) {
          req.set_operand(static_cast<gemm::v1::Operand>(1 + flags / 2 % 3));
          data = Floats(4 * (flags / 8 % 6));
        }
        req.set_end_of_job(flags & 64);
        reading = harness.Feed(wire::EncodeStreamRequest(req, data));
        break;
      }
      case 2:
      case 3: {  // a data chunk
        const uint8_t part = in.Byte();
        req.set_operand(static_cast<gemm::v1::Operand>(part % 4));
        req.set_offset(4 * (part / 4 % 8));
        req.set_end_of_job(part & 128);
        reading = harness.Feed(
            wire::EncodeStreamRequest(req, Floats(in.Byte() % 66)));
        break;
      }
      case 4:  // end_of_job alone
        req.set_end_of_job(true);
        reading = harness.Feed(wire::EncodeStreamRequest(req, ""));
        break;
      case 5: {  // a whole job, its operands mostly the right size
        const gemm::v1::GemmParams params = Params(in);
        const uint8_t sizes = in.Byte();
        const uint64_t m = params.m(), n = params.n(), k = params.k();
        const std::string a = Floats(4 * m * k + (sizes & 1 ? 4 : 0));
        const std::string b = Floats(4 * k * n);
        const std::string c = Floats(sizes & 2 ? 4 * m * n : 0);
        reading = harness.Feed(wire::EncodeWholeJob(id, params, {a, b, c}));
        break;
      }
      case 6: {  // raw bytes
        const std::string bytes = in.Bytes(in.Byte() % 24);
        grpc::Slice slice(bytes);
        reading = harness.Feed(grpc::ByteBuffer(&slice, 1));
        break;
      }
      case 7:
        if (id == 0) {
          harness.WaitForJobs();
        } else if (id == 1) {
          harness.ExpireAll();
        } else {
          harness.DrainOutbox();
        }
        break;
      case 8:
        if (id == 3) {
          harness.Drain();
          drained = true;
          reading = false;
        }
        break;
    }
  }
  if (reading && !drained) harness.ReadsDone();
  harness.CheckEnd();
  return 0;
}
