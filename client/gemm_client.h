// libgemm_client: the C++ client of gemm.v1.GemmService.
//
// GemmClient owns one channel to a server and offers synchronous and
// asynchronous GEMMs. Jobs small enough for one message use the unary Gemm
// call; larger ones go over GemmStream in chunks, transparently. JobStream
// pipelines many jobs on one stream. Results land in buffers the caller
// provides.
//
// Thread-safety: GemmClient and JobStream are thread-safe. The caller's
// buffers (args.a, args.b, args.c and c_out) must stay valid until the job's
// callback has run (or its synchronous call returned). Destroying a
// GemmClient waits until every call it started has ended, so destroy (or
// Finish()) its JobStreams first.
//
//   ASSIGN_OR_RETURN(auto client, GemmClient::Create({.target = "host:50051"}));
//   GemmArgs args{.m = 512, .n = 512, .k = 512, .a = a.data(), .b = b.data()};
//   std::vector<float> c(512 * 512);
//   ASSIGN_OR_RETURN(gemm::v1::Timing timing, client->Gemm(args, c.data()));
#ifndef GEMM_CLIENT_GEMM_CLIENT_H_
#define GEMM_CLIENT_GEMM_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/gemm.grpc.pb.h"

namespace gemm::client {

// One job: C = alpha * op(A) * op(B) + beta * C, row-major float32; see
// proto/gemm.proto for the shapes. The pointers are the caller's.
struct GemmArgs {
  uint32_t m = 0;
  uint32_t n = 0;
  uint32_t k = 0;
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;
  // "auto" or a name from Info's kernels.
  std::string kernel = "auto";
  // Server-side budget from the job's arrival; 0 = none.
  uint32_t timeout_ms = 0;
  const float* a = nullptr;  // m*k floats (k*m when trans_a)
  const float* b = nullptr;  // k*n floats (n*k when trans_b)
  const float* c = nullptr;  // m*n floats; may be null when beta == 0
};

// Runs once per job, on a gRPC thread: the server's timing, or the error.
using GemmCallback = std::function<void(absl::StatusOr<v1::Timing>)>;

// The one conversion from grpc::Status back to absl::Status.
absl::Status FromGrpcStatus(const grpc::Status& status);

// Many jobs pipelined on one GemmStream call. Create with
// GemmClient::OpenStream().
// Counts a client's calls that are still running. Thread-safe.
class CallTracker {
 public:
  // Held by each call from start to its very last step.
  class Token {
   public:
    explicit Token(std::shared_ptr<CallTracker> tracker);
    ~Token();
    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;

   private:
    std::shared_ptr<CallTracker> tracker_;
  };
  void WaitForIdle();

 private:
  absl::Mutex mu_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
};

class JobStream {
 public:
  class Reactor;
  explicit JobStream(std::shared_ptr<Reactor> reactor);
  ~JobStream();  // Finish()es.

  // Queues a job; `done` runs once C is in c_out (m*n floats) or the job
  // failed. Never blocks on the network.
  void Submit(const GemmArgs& args, float* c_out, GemmCallback done);

  // Half-closes the stream once every submitted job is sent and waits for
  // all of them to end. Returns the stream's final status (per-job errors
  // go to the callbacks).
  absl::Status Finish();

 private:
  std::shared_ptr<Reactor> reactor_;
  bool finished_ = false;
};

class GemmClient {
 public:
  struct Options {
    // host:port of the server.
    std::string target = "localhost:50051";
    // Jobs whose A, B and C together exceed this go over GemmStream in
    // chunks; smaller ones use the unary call. Default 3 MiB, under gRPC's
    // common 4 MiB message limit.
    uint64_t max_unary_bytes = uint64_t{3} << 20;
    // Size of the chunks a job's operands are cut into. Default 1 MiB.
    uint64_t chunk_bytes = uint64_t{1} << 20;
    // Largest message received. Default 64 MiB.
    int max_receive_message_bytes = 64 << 20;
    // Deadline of each call; zero means none.
    absl::Duration timeout = absl::ZeroDuration();
  };

  static absl::StatusOr<std::unique_ptr<GemmClient>> Create(
      const Options& options);
  ~GemmClient();  // waits for calls still running

  absl::StatusOr<v1::InfoResponse> Info();

  // Computes one job and writes C (m*n floats) into c_out.
  absl::StatusOr<v1::Timing> Gemm(const GemmArgs& args, float* c_out);

  // Starts one job; `done` runs when C is in c_out or the job failed.
  void GemmAsync(const GemmArgs& args, float* c_out, GemmCallback done);

  // Opens a stream for pipelining many jobs.
  std::unique_ptr<JobStream> OpenStream();

  const Options& options() const { return options_; }
  v1::GemmService::Stub& stub() { return *stub_; }

 private:
  explicit GemmClient(const Options& options);
  void ApplyDeadline(grpc::ClientContext* context) const;

  const Options options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::GemmService::Stub> stub_;
  // Lets the destructor wait for calls still running, so that the channel
  // (and gRPC itself) is never released from one of gRPC's own threads.
  std::shared_ptr<CallTracker> tracker_ = std::make_shared<CallTracker>();
};

// Checks a job's arguments before anything is sent.
absl::Status CheckArgs(const GemmArgs& args);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_GEMM_CLIENT_H_
