// libgemm_client: the C++ client of gemm.v1.GemmService.
//
// GemmClient holds one or more channels (connections) to one or more
// servers and offers synchronous GEMMs (Gemm), asynchronous ones with a
// callback (GemmAsync) or a future (GemmFuture), and pipelining of many jobs
// on one stream (OpenStream -> JobStream). Channels are created once and
// reused by every call.
//
// Load balancing: with several Options.targets (and/or
// connections_per_target > 1) the client keeps one channel per connection
// and rotates over them: each unary call, each retry and each OpenStream()
// takes the next channel (client-side round robin). A JobStream stays on the
// channel it was opened on; open one stream per connection to spread a
// pipeline over all of them.
//
// Large jobs: jobs small enough for one message use the unary Gemm call;
// larger ones go over GemmStream in chunks, transparently. On a stream, a
// job of at most Options.whole_job_max_bytes travels as one message and a
// result of at most Options.inline_result_max_bytes comes back as one.
//
// Copies: both calls are raw (grpc::ByteBuffer, proto/wire_codec.h), so a
// byte is copied once in user space each way: operands from the caller's
// A, B and C straight into the outgoing message (gRPC may still hold a
// message after its write is reported done, so it never points at the
// caller's memory), results from the received slices straight into c_out.
//
// Deadlines: Options.timeout is the gRPC deadline of each call attempt (for
// a JobStream, of the whole stream). GemmArgs.timeout_ms is the server-side
// budget of one job.
//
// Retries: with Options.retry.max_attempts > 1, a job that fails with
// UNAVAILABLE (queue full, server restarting, connection refused) is sent
// again after an exponential backoff with jitter, on the next channel for
// unary calls and on the same stream for JobStream jobs. Every job can be
// resent because the caller's buffers stay valid until its callback. Jobs of
// a stream that broke as a whole are not retried (open a new stream), nor
// are unary jobs that update C in place in a region (result_region naming
// c_region's bytes): the server may have run one before its UNAVAILABLE.
//
// Thread-safety: GemmClient and JobStream are thread-safe. The caller's
// buffers (args.a, args.b, args.c and c_out) must stay valid until the job's
// callback has run (or its synchronous call returned, or its future is
// ready). Destroying a GemmClient waits until every call it started has
// ended (retries included), so destroy (or Finish()) its JobStreams first,
// and never destroy it from inside one of its callbacks.
//
// This header is the one to include; the parts it is made of have headers
// of their own: gemm_args.h (GemmArgs, GemmCallback), job_stream.h
// (JobStream, and stream_job.h for one job on it), retry.h (RetryPolicy,
// backoff), split_job.h (row splitting), call_tracker.h.
//
//   ASSIGN_OR_RETURN(auto client, GemmClient::Create({.target =
//   "host:50051"})); GemmArgs args{.problem = {.m = 512, .n = 512, .k = 512},
//                 .a = a.data(), .b = b.data()};
//   std::vector<float> c(512 * 512);
//   ASSIGN_OR_RETURN(gemm::v1::Timing timing, client->Gemm(args, c.data()));
#ifndef GEMM_CLIENT_LIB_GEMM_CLIENT_H_
#define GEMM_CLIENT_LIB_GEMM_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/lib/call_tracker.h"
#include "client/lib/gemm_args.h"
#include "client/lib/job_stream.h"
#include "client/lib/retry.h"
#include "common/gemm_problem.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "proto/gemm.grpc.pb.h"

namespace gemm::client {

class GemmClient {
 public:
  struct Options {
    // host:port of the server; used when `targets` is empty. A target of
    // several addresses, "dns:///name:port" (a Kubernetes headless Service)
    // or "ipv4:ADDR:PORT,ADDR:PORT", is balanced round robin over them, on
    // one channel.
    std::string target = "localhost:50051";
    // Several servers (host:port each) to balance over, round robin.
    std::vector<std::string> targets;
    // Channels (separate TCP connections) opened to each target. Default 1.
    int connections_per_target = 1;
    // Jobs whose A, B and C together exceed this go over GemmStream in
    // chunks; smaller ones use the unary call. Default 3 MiB, under gRPC's
    // common 4 MiB message limit.
    uint64_t max_unary_bytes = uint64_t{3} << 20;
    // Size of the chunks a job's operands are cut into. Default 1 MiB
    // (4 and 16 MiB measured no faster on the H200 host:
    // docs/reference/performance.md).
    uint64_t chunk_bytes = uint64_t{1} << 20;
    // Stream jobs whose A, B and C together are at most this go as one
    // message (StreamRequest.job) instead of a params message and chunks:
    // one message per small job. Servers before 0.2.0 refuse such messages;
    // set 0 for them. Default 1 MiB (with inline results: +16% jobs/s for
    // 128^3 on the H200 host, docs/reference/performance.md).
    uint64_t whole_job_max_bytes = uint64_t{1} << 20;
    // Stream results of at most this many bytes come back inside the job's
    // end record (GemmParams.inline_result_max_bytes) rather than as chunks;
    // servers before 0.2.0 ignore it and send chunks, which also works; a
    // server caps it at its result_chunk_bytes. 0 disables. Default 1 MiB.
    uint64_t inline_result_max_bytes = uint64_t{1} << 20;
    // HTTP/2 flow-control window each stream aims for
    // (GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES): how far the server may send
    // results ahead of this client's reads. 0 (the default): gRPC's own
    // (64 KiB, grown by BDP probing).
    int http2_stream_window_bytes = 0;
    // Largest HTTP/2 frame this client accepts
    // (GRPC_ARG_HTTP2_MAX_FRAME_SIZE), at most 16 MiB - 1. 0 (the
    // default): gRPC's own (16 KiB).
    int http2_max_frame_bytes = 0;
    // Lets gRPC hold a small stream message (at most 256 KiB) back while
    // more are queued behind it on the same stream, so that several go out
    // in one socket write. A hinted message leaves only when the
    // connection next writes for some other reason, so on a quiet
    // connection it can wait. Default false.
    bool coalesce_small_writes = false;
    // Large jobs over several connections at once: a job of at least
    // split_min_bytes (A, B and C together) is cut into split_rows blocks of
    // rows of C, each sent as a job of its own on the next channel, all at
    // once; every part carries all of B. One TCP connection moves ~2.3 GB/s
    // through gRPC on the H200 host, so a 192 MB job gains from several
    // (docs/reference/performance.md). Not done for trans_a (the rows of op(A)
    // are not contiguous) nor for jobs of fewer rows than parts. 1 (the
    // default): never.
    int split_rows = 1;
    uint64_t split_min_bytes = uint64_t{64} << 20;
    // Largest message received. Default 64 MiB.
    int max_receive_message_bytes = 64 << 20;
    // Deadline of each call attempt (of the whole call for a JobStream);
    // zero means none.
    absl::Duration timeout = absl::ZeroDuration();
    // Retries on UNAVAILABLE; off by default.
    RetryPolicy retry;
    // TLS. On when `tls` is true or any file below is given: the server's
    // certificate is checked against the CAs of tls_ca_file (default: the
    // system's roots). tls_cert_file and tls_key_file (PEM) present a client
    // certificate, for a server that asks for one (mTLS). Default:
    // plaintext.
    bool tls = false;
    std::string tls_ca_file;
    std::string tls_cert_file;
    std::string tls_key_file;
    // A file holding the bearer token every call carries
    // ("authorization: Bearer TOKEN"); needs TLS, since gRPC sends call
    // credentials only over a secure channel. Default empty: none.
    std::string token_file;
  };

  static absl::StatusOr<std::unique_ptr<GemmClient>> Create(
      const Options& options);
  ~GemmClient();  // waits for calls still running

  // Info of the server behind the next channel.
  absl::StatusOr<v1::InfoResponse> Info();
  // The standard health check (grpc.health.v1.Health/Check) of the server
  // behind the next channel, for `service` (empty: the whole server), as a
  // probe asks it: "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN" or
  // "UNKNOWN"; the call's error when it fails (NOT_FOUND: no such
  // service).
  absl::StatusOr<std::string> Health(const std::string& service = "");

  // Computes one job and writes C (m*n floats) into c_out. Blocks.
  absl::StatusOr<v1::Timing> Gemm(const GemmArgs& args, float* c_out);

  // Starts one job; `done` runs once, on a gRPC or retry thread, when C is
  // in c_out or the job failed for good. Never blocks on the network.
  void GemmAsync(const GemmArgs& args, float* c_out, GemmCallback done);

  // GemmAsync with a future instead of a callback.
  std::future<absl::StatusOr<v1::Timing>> GemmFuture(const GemmArgs& args,
                                                     float* c_out);

  // Whether GemmAsync() would split this job over several channels
  // (Options.split_rows).
  bool WouldSplit(const GemmArgs& args) const;

  // Whether GemmAsync() sends this job (or each part of a split one) as a
  // unary Gemm call; a larger one goes over a GemmStream call of its own,
  // in chunks (Options.max_unary_bytes).
  bool WouldSendUnary(const GemmArgs& args) const;

  // Opens a stream for pipelining many jobs, on the next channel.
  std::unique_ptr<JobStream> OpenStream();

  // Shared-memory regions (gemm.proto's Region; shm_region.h), for a
  // server on this host. RegisterRegion registers `request` with every
  // target's server (jobs rotate over them); when one refuses, those that
  // took it are told to forget it again and the refusal is returned.
  absl::StatusOr<v1::RegionInfo> RegisterRegion(
      const v1::RegisterRegionRequest& request);
  // Forgets a region on every target; returns once no job uses it there
  // and each server has unmapped it. NOT_FOUND when no server had it.
  absl::Status UnregisterRegion(const std::string& name);
  // The caller's regions on the server behind the next channel.
  absl::StatusOr<std::vector<v1::RegionInfo>> ListRegions();

  const Options& options() const { return options_; }
  // The server addresses, one per channel, in rotation order.
  std::vector<std::string> channel_targets() const;
  // The stub of the first channel (for raw calls in tests).
  v1::GemmService::Stub& stub() { return *channels_[0].stub; }

 private:
  struct Channel {
    std::string target;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1::GemmService::Stub> stub;  // Info, tests
    std::unique_ptr<grpc::GenericStub> raw;       // Gemm, GemmStream
  };

  GemmClient(const Options& options,
             std::shared_ptr<grpc::ChannelCredentials> credentials);
  void ApplyDeadline(grpc::ClientContext* context) const;
  // What a JobStream needs from Options.
  JobStream::Options StreamOptions() const;
  Channel& NextChannel();
  // The first channel of each target: one per server.
  std::vector<Channel*> ChannelPerTarget();
  // Runs a job as Options.split_rows jobs on consecutive channels.
  void SplitAsync(const GemmArgs& args, float* c_out, GemmCallback done);
  // Attempt `attempt` (from 1) of a job, on channel channel_index % size.
  void StartAttempt(const GemmArgs& args, float* c_out, GemmCallback done,
                    int attempt, uint64_t channel_index);

  const Options options_;
  std::vector<Channel> channels_;
  std::atomic<uint64_t> next_channel_{0};
  // Lets the destructor wait for calls still running, so that the channel
  // (and gRPC itself) is never released from one of gRPC's own threads.
  std::shared_ptr<CallTracker> tracker_ = std::make_shared<CallTracker>();
  // Runs delayed retries; destroyed after the tracker is idle.
  std::shared_ptr<RetryScheduler> retries_;
};

}  // namespace gemm::client

#endif  // GEMM_CLIENT_LIB_GEMM_CLIENT_H_
