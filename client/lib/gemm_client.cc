#include "client/lib/gemm_client.h"

#include <future>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "client/lib/grpc_status.h"
#include "client/lib/split_job.h"
#include "common/secret_file.h"
#include "proto/wire_codec.h"

namespace gemm::client {
namespace {

constexpr char kGemmMethod[] = "/gemm.v1.GemmService/Gemm";

// One unary call, owned by its completion callback, which deletes it: the
// context must stay alive until then, and be gone before gRPC releases the
// call.
struct UnaryCall {
  explicit UnaryCall(std::shared_ptr<CallTracker> tracker)
      : token(std::move(tracker)) {}
  CallTracker::Token token;  // destroyed last
  grpc::ClientContext context;
  grpc::ByteBuffer request;  // a copy of the caller's operands
  grpc::ByteBuffer response;
};

// The outcome of a unary call: the timing with C copied into c_out, or the
// error.
absl::StatusOr<v1::Timing> UnaryOutcome(const grpc::Status& status,
                                        const grpc::ByteBuffer& buffer,
                                        uint64_t c_bytes, float* c_out) {
  if (!status.ok()) return FromGrpcStatus(status);
  wire::DecodedGemmResponse response;
  absl::Status decoded = wire::DecodeGemmResponse(buffer, &response);
  if (!decoded.ok()) {
    return absl::InternalError(
        absl::StrCat("from the server: ", decoded.message()));
  }
  if (response.c.size != c_bytes) {
    return absl::InternalError(absl::StrFormat(
        "server sent %d bytes of C, expected %d", response.c.size, c_bytes));
  }
  response.c.CopyTo(reinterpret_cast<char*>(c_out));
  return std::move(*response.header.mutable_timing());
}

// Plaintext, or TLS with the options' PEM files, and the token's call
// credentials.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsOf(
    const GemmClient::Options& options) {
  const bool tls = options.tls || !options.tls_ca_file.empty() ||
                   !options.tls_cert_file.empty() ||
                   !options.tls_key_file.empty();
  if (!tls) {
    if (!options.token_file.empty()) {
      return absl::InvalidArgumentError(
          "--token-file needs TLS (--tls or --tls-ca): gRPC sends a token "
          "only over a secure channel");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together: the client certificate and "
        "its key");
  }
  grpc::SslCredentialsOptions ssl;
  if (!options.tls_ca_file.empty()) {
    absl::StatusOr<std::string> ca =
        ReadSecretFile(options.tls_ca_file, "--tls-ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
  }
  if (!options.tls_cert_file.empty()) {
    absl::StatusOr<std::string> cert =
        ReadSecretFile(options.tls_cert_file, "--tls-cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key =
        ReadSecretFile(options.tls_key_file, "--tls-key");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  std::shared_ptr<grpc::ChannelCredentials> channel = grpc::SslCredentials(ssl);
  if (options.token_file.empty()) return channel;
  absl::StatusOr<std::string> token =
      ReadSecretFile(options.token_file, "--token-file");
  if (!token.ok()) return token.status();
  return grpc::CompositeChannelCredentials(
      channel, grpc::AccessTokenCredentials(
                   std::string(absl::StripAsciiWhitespace(*token))));
}

}  // namespace

GemmClient::GemmClient(const Options& options,
                       std::shared_ptr<grpc::ChannelCredentials> credentials)
    : options_(options) {
  std::vector<std::string> targets = options.targets;
  if (targets.empty()) targets.push_back(options.target);
  for (int connection = 0; connection < options.connections_per_target;
       ++connection) {
    for (const std::string& target : targets) {
      grpc::ChannelArguments arguments;
      arguments.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
      arguments.SetMaxSendMessageSize(-1);
      // Channels with equal arguments share one connection; a channel of its
      // own subchannel pool gets a TCP connection of its own.
      arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      // A name of several addresses (dns:/// of a headless Service's pods,
      // or an ipv4:/ipv6: list): calls go round robin over all of them,
      // not to the first alone.
      if (absl::StartsWith(target, "dns:") ||
          absl::StartsWith(target, "ipv4:") ||
          absl::StartsWith(target, "ipv6:")) {
        arguments.SetLoadBalancingPolicyName("round_robin");
      }
      // Large results: a deep per-stream window and large frames (see
      // Options).
      if (options.http2_stream_window_bytes > 0) {
        arguments.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                         options.http2_stream_window_bytes);
      }
      if (options.http2_max_frame_bytes > 0) {
        arguments.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE,
                         options.http2_max_frame_bytes);
      }
      Channel channel;
      channel.target = target;
      channel.channel =
          grpc::CreateCustomChannel(target, credentials, arguments);
      channel.stub = v1::GemmService::NewStub(channel.channel);
      channel.raw = std::make_unique<grpc::GenericStub>(channel.channel);
      channels_.push_back(std::move(channel));
    }
  }
  if (options.retry.max_attempts > 1) {
    retries_ = std::make_shared<RetryScheduler>(options.retry);
  }
}

GemmClient::~GemmClient() {
  tracker_->WaitForIdle();
  retries_.reset();
}

absl::StatusOr<std::unique_ptr<GemmClient>> GemmClient::Create(
    const Options& options) {
  if (options.targets.empty() && options.target.empty()) {
    return absl::InvalidArgumentError("target: empty server address");
  }
  for (const std::string& target : options.targets) {
    if (target.empty()) {
      return absl::InvalidArgumentError("targets: empty server address");
    }
  }
  if (options.connections_per_target < 1) {
    return absl::InvalidArgumentError(
        "connections_per_target: must be at least 1");
  }
  if (options.chunk_bytes < 4 || options.chunk_bytes % 4 != 0) {
    return absl::InvalidArgumentError(
        "chunk_bytes: must be a positive multiple of 4");
  }
  absl::Status retry = ValidateRetryPolicy(options.retry);
  if (!retry.ok()) return retry;
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsOf(options);
  if (!credentials.ok()) return credentials.status();
  return std::unique_ptr<GemmClient>(
      new GemmClient(options, *std::move(credentials)));
}

std::vector<std::string> GemmClient::channel_targets() const {
  std::vector<std::string> targets;
  for (const Channel& channel : channels_) targets.push_back(channel.target);
  return targets;
}

GemmClient::Channel& GemmClient::NextChannel() {
  return channels_[next_channel_.fetch_add(1, std::memory_order_relaxed) %
                   channels_.size()];
}

void GemmClient::ApplyDeadline(grpc::ClientContext* context) const {
  if (options_.timeout > absl::ZeroDuration()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  }
}

JobStream::Options GemmClient::StreamOptions() const {
  JobStream::Options stream;
  stream.limits.chunk_bytes = options_.chunk_bytes;
  stream.limits.whole_job_max_bytes = options_.whole_job_max_bytes;
  stream.limits.inline_result_max_bytes = options_.inline_result_max_bytes;
  stream.coalesce_small_writes = options_.coalesce_small_writes;
  stream.timeout = options_.timeout;
  stream.max_attempts = options_.retry.max_attempts;
  return stream;
}

absl::StatusOr<v1::InfoResponse> GemmClient::Info() {
  grpc::ClientContext context;
  ApplyDeadline(&context);
  v1::InfoResponse response;
  grpc::Status status =
      NextChannel().stub->Info(&context, v1::InfoRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<std::string> GemmClient::Health(const std::string& service) {
  grpc::ClientContext context;
  ApplyDeadline(&context);
  // HealthCheckRequest{service = 1}, HealthCheckResponse{status = 1}: the
  // two fields are encoded here rather than depending on health.proto.
  std::string request;
  if (!service.empty()) {
    if (service.size() > 127) {
      return absl::InvalidArgumentError("service: longer than 127 bytes");
    }
    request =
        std::string("\x0a", 1) + static_cast<char>(service.size()) + service;
  }
  grpc::Slice slice(request);
  const grpc::ByteBuffer in(&slice, 1);
  grpc::ByteBuffer out;
  std::promise<grpc::Status> finished;
  NextChannel().raw->UnaryCall(
      &context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &in, &out,
      [&finished](grpc::Status status) { finished.set_value(status); });
  const grpc::Status status = finished.get_future().get();
  if (!status.ok()) return FromGrpcStatus(status);
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (out.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  if (bytes.empty()) return std::string("UNKNOWN");  // status 0 is not sent
  if (bytes.size() != 2 || bytes[0] != 0x08) {
    return absl::InternalError("the health reply is not a HealthCheckResponse");
  }
  switch (bytes[1]) {
    case 1:
      return std::string("SERVING");
    case 2:
      return std::string("NOT_SERVING");
    case 3:
      return std::string("SERVICE_UNKNOWN");
    default:
      return std::string("UNKNOWN");
  }
}

absl::StatusOr<v1::Timing> GemmClient::Gemm(const GemmArgs& args,
                                            float* c_out) {
  return GemmFuture(args, c_out).get();
}

std::future<absl::StatusOr<v1::Timing>> GemmClient::GemmFuture(
    const GemmArgs& args, float* c_out) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<v1::Timing>>>();
  std::future<absl::StatusOr<v1::Timing>> result = promise->get_future();
  GemmAsync(args, c_out, [promise](absl::StatusOr<v1::Timing> timing) {
    promise->set_value(std::move(timing));
  });
  return result;
}

void GemmClient::GemmAsync(const GemmArgs& args, float* c_out,
                           GemmCallback done) {
  absl::Status s = CheckArgs(args);
  if (!s.ok()) {
    done(s);
    return;
  }
  if (WouldSplit(args)) {
    SplitAsync(args, c_out, std::move(done));
    return;
  }
  StartAttempt(args, c_out, std::move(done), 1,
               next_channel_.fetch_add(1, std::memory_order_relaxed));
}

void GemmClient::StartAttempt(const GemmArgs& args, float* c_out,
                              GemmCallback done, int attempt,
                              uint64_t channel_index) {
  // C updated in place in a region is not sent again: an UNAVAILABLE from
  // the transport may come after the server ran the job, and a second run
  // would start from its result.
  const bool in_place = args.result_region.used() &&
                        args.problem.beta != 0.0f &&
                        args.c_region.region == args.result_region.region &&
                        args.c_region.offset == args.result_region.offset;
  if (retries_ != nullptr && attempt < options_.retry.max_attempts &&
      !in_place) {
    // Wraps `done`: an UNAVAILABLE attempt starts the next one after the
    // backoff. The token keeps the client (and `this`) alive meanwhile.
    auto token = std::make_shared<CallTracker::Token>(tracker_);
    done = [this, args, c_out, attempt, channel_index, token,
            done = std::move(done)](absl::StatusOr<v1::Timing> result) mutable {
      if (result.ok() ||
          result.status().code() != absl::StatusCode::kUnavailable) {
        done(std::move(result));
        return;
      }
      retries_->AfterBackoff(attempt,
                             [this, args, c_out, attempt, channel_index, token,
                              done = std::move(done)]() mutable {
                               // The next channel: a retry tries every server
                               // in turn.
                               StartAttempt(args, c_out, std::move(done),
                                            attempt + 1, channel_index + 1);
                             });
    };
  }
  Channel& channel = channels_[channel_index % channels_.size()];
  if (!WouldSendUnary(args)) {
    // Retries happen here, not inside the stream.
    JobStream::RunOne(channel.raw.get(), StreamOptions(), tracker_, args, c_out,
                      std::move(done));
    return;
  }
  UnaryCall* call = new UnaryCall(tracker_);
  ApplyDeadline(&call->context);
  call->request = wire::EncodeGemmRequest(ParamsOf(args), OperandsOf(args));
  const uint64_t c_bytes = ResultBytes(args);
  channel.raw->UnaryCall(
      &call->context, kGemmMethod, grpc::StubOptions(), &call->request,
      &call->response,
      [call, c_out, c_bytes, done = std::move(done)](grpc::Status status) {
        // The user's callback runs before the call's token goes, so that
        // ~GemmClient waits for it too.
        done(UnaryOutcome(status, call->response, c_bytes, c_out));
        delete call;
      });
}

bool GemmClient::WouldSplit(const GemmArgs& args) const {
  return CanSplitRows(args, options_.split_rows) &&
         JobBytes(args) >= options_.split_min_bytes;
}

bool GemmClient::WouldSendUnary(const GemmArgs& args) const {
  return JobBytes(args) <= options_.max_unary_bytes;
}

void GemmClient::SplitAsync(const GemmArgs& args, float* c_out,
                            GemmCallback done) {
  const int parts = options_.split_rows;
  auto result =
      std::make_shared<SplitResult>(args.problem, parts, std::move(done));
  // Consecutive channels: with at least `parts` of them, one part each.
  const uint64_t first_channel =
      next_channel_.fetch_add(parts, std::memory_order_relaxed);
  std::vector<RowBlock> blocks = SplitRows(args, c_out, parts);
  for (size_t i = 0; i < blocks.size(); ++i) {
    StartAttempt(
        blocks[i].args, blocks[i].c_out,
        [result](absl::StatusOr<v1::Timing> part) {
          result->PartDone(std::move(part));
        },
        1, first_channel + i);
  }
}

std::unique_ptr<JobStream> GemmClient::OpenStream() {
  Channel& channel = NextChannel();
  return JobStream::Open(channel.raw.get(), channel.target, StreamOptions(),
                         tracker_, retries_.get());
}

}  // namespace gemm::client
