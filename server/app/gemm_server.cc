#include "server/app/gemm_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/resource_quota.h"
#include "proto/wire_codec.h"
#include "server/app/server_gauges.h"
#include "server/cpu/cpu_executor.h"
#include "server/edge/early_cancel_interceptor.h"
#include "server/observability/metered_executor.h"
#include "server/rpc/reflection_service.h"
#ifdef GEMM_HAVE_CUDA
#include "server/cuda/cuda_executor.h"
#endif
#include "common/secret_file.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

constexpr char kServiceName[] = "gemm.v1.GemmService";

// The listener's limits. Callers known by token or certificate are each a
// client, and an address has a cap of its own.
ConnectionLimiter::Options ConnectionLimitsOf(
    const GemmServer::Options& options) {
  ConnectionLimiter::Options limits;
  limits.max_connections = options.max_connections;
  limits.max_connections_per_client = options.max_connections_per_client;
  if (!options.token_file.empty() || !options.tls_client_ca_file.empty()) {
    limits.max_connections_per_client = options.max_connections_per_address;
    limits.per_client_flag = "--max-address-connections";
    limits.max_connections_per_identity = options.max_connections_per_client;
  }
  return limits;
}

// The executor, with its host allocator, worker count and, where it runs
// light jobs between the parts of heavy ones, which jobs are light.
struct Backend {
  std::unique_ptr<Executor> executor;
  HostAllocator* host_allocator = nullptr;
  int workers = 1;
  std::function<bool(const GemmJob&)> light;
};

absl::StatusOr<Backend> MakeCpuBackend(const GemmServer::Options& options) {
  CpuExecutor::Options cpu;
  cpu.threads = options.cpu_threads;
  ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutor> executor,
                   CpuExecutor::Create(cpu));
  Backend backend;
  backend.executor = std::move(executor);
  // One worker for any job, one for light jobs, which run between the
  // tiles of a heavy one (CpuExecutor).
  backend.workers = 2;
  backend.light = [](const GemmJob& job) {
    return CpuExecutor::IsLight(job.problem());
  };
  return backend;
}

absl::StatusOr<Backend> MakeBackend(const GemmServer::Options& options) {
  if (options.backend != "auto" && options.backend != "cuda" &&
      options.backend != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--backend: must be auto, cuda or cpu, got '", options.backend, "'"));
  }
  if (options.backend == "cpu") return MakeCpuBackend(options);
#ifdef GEMM_HAVE_CUDA
  std::string why;
  if (CudaExecutor::VisibleDeviceCount(&why) == 0) {
    if (options.backend == "cuda") {
      return absl::FailedPreconditionError(
          absl::StrCat("--backend=cuda, but no GPU can be used (", why,
                       "); use --backend=cpu or auto"));
    }
    spdlog::info("no GPU ({}); using the cpu backend", why);
    return MakeCpuBackend(options);
  }
  CudaExecutorOptions cuda = options.cuda;
  // Jobs' pinned blocks count against the in-flight budget: a pool larger
  // than the budget could never be used.
  cuda.pinned_pool_bytes =
      std::min(cuda.pinned_pool_bytes, InflightBudgetBytes(options.limits));
  ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutor> executor,
                   CudaExecutor::Create(cuda));
  Backend backend;
  backend.host_allocator = executor->host_allocator();
  backend.workers = executor->concurrency();
  backend.executor = std::move(executor);
  return backend;
#else
  if (options.backend == "cuda") {
    return absl::FailedPreconditionError(
        "--backend=cuda: this gemm-server was built without CUDA; use "
        "--backend=cpu or auto");
  }
  return MakeCpuBackend(options);
#endif
}

// Plaintext, TLS, or mTLS, from the options' PEM files.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsOf(
    const GemmServer::Options& options) {
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together: the certificate and its key");
  }
  if (options.tls_cert_file.empty()) {
    if (!options.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls-client-ca needs --tls-cert and --tls-key: client "
          "certificates are checked in the TLS handshake");
    }
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.cert_chain,
                   ReadSecretFile(options.tls_cert_file, "--tls-cert"));
  ASSIGN_OR_RETURN(pair.private_key,
                   ReadSecretFile(options.tls_key_file, "--tls-key"));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (!options.tls_client_ca_file.empty()) {
    ASSIGN_OR_RETURN(
        ssl.pem_root_certs,
        ReadSecretFile(options.tls_client_ca_file, "--tls-client-ca"));
    ssl.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

// Options::max_client_unary_reads in force: a client's requests being read
// (each up to a message) fill at most a quarter of gRPC's resource quota,
// so that one client's unfinished requests leave room for the others'.
size_t UnaryReadsPerClient(const GemmServer::Options& options) {
  if (options.max_client_unary_reads > 0) return options.max_client_unary_reads;
  if (options.grpc_memory_bytes == 0) return 8;
  const uint64_t message =
      std::max<uint64_t>(options.limits.max_message_bytes, 1);
  return static_cast<size_t>(
      std::max<uint64_t>(options.grpc_memory_bytes / 4 / message, 1));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GemmServer>> GemmServer::Create(
    const Options& options) {
  if (options.limits.max_job_bytes > options.limits.max_inflight_bytes) {
    return absl::InvalidArgumentError(
        "max_job_bytes must not exceed max_inflight_bytes: such a job could "
        "never be admitted");
  }
  // A chunk, or a result of a chunk's size inline in its JobEnd, must fit
  // in a message with its header.
  if (options.limits.result_chunk_bytes < 4 ||
      options.limits.result_chunk_bytes + wire::kResultMessageOverheadBytes >
          options.limits.max_message_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "result_chunk_bytes (", options.limits.result_chunk_bytes,
        ") must be at least 4 and leave ", wire::kResultMessageOverheadBytes,
        " bytes of max_message_bytes (", options.limits.max_message_bytes,
        ") for a result message's header"));
  }
  std::unique_ptr<GemmServer> server(new GemmServer());
  // SERVING from the start (no one can ask before the server listens), so
  // that a device lost while the server is made stays NOT_SERVING.
  server->health_ = std::make_unique<HealthService>();
  server->health_->SetServingStatus(kServiceName, true);
  server->metrics_ = std::make_unique<ServerMetrics>();
  ASSIGN_OR_RETURN(Backend backend, MakeBackend(options));
  if (options.decorate_executor) {
    // The host allocator stays the inner executor's, which the decorated
    // one owns.
    backend.executor = options.decorate_executor(std::move(backend.executor));
    if (backend.executor == nullptr) {
      return absl::InvalidArgumentError("decorate_executor returned nullptr");
    }
  }
  GemmServer* self = server.get();
  backend.executor = std::make_unique<MeteredExecutor>(
      std::move(backend.executor), server->metrics_.get(),
      [self, on_fatal = options.on_fatal](const absl::Status& why) {
        // No device left: health says so at once, for load balancers and
        // orchestrators; the process decides how to stop (on_fatal).
        spdlog::critical(
            "no device can compute any more ({}); health is "
            "NOT_SERVING",
            why.ToString());
        self->health_->SetServingStatus(false);
        if (on_fatal) on_fatal(why);
      });
  server->executor_ = std::move(backend.executor);
  server->host_allocator_ = backend.host_allocator;
  BatchScheduler::Options batching = options.batching;
  if (batching.num_workers == 0) batching.num_workers = backend.workers;
  if (backend.light && batching.num_workers > 1) {
    batching.light_workers = 1;
    batching.light = backend.light;
  }
  ASSIGN_OR_RETURN(server->scheduler_,
                   BatchScheduler::Create(batching, server->executor_.get()));
  ASSIGN_OR_RETURN(server->authenticator_,
                   CallAuthenticator::Create(options.token_file));
  ASSIGN_OR_RETURN(const std::shared_ptr<grpc::ServerCredentials> credentials,
                   ServerCredentialsOf(options));
  GemmServiceImpl::Options service_options;
  static_cast<GemmServiceSettings&>(service_options) = options;
  service_options.authenticator = server->authenticator_.get();
  service_options.version = kVersion;
  service_options.host_allocator = server->host_allocator_;
  service_options.metrics = server->metrics_.get();
  service_options.max_client_unary_reads = UnaryReadsPerClient(options);
  // The listener's limiter is made below, before any call can come.
  GemmServer* const raw = server.get();
  service_options.health = server->health_.get();
  service_options.shut_out = [raw](const std::string& client,
                                   absl::Time until) -> size_t {
    return raw->connection_limiter_ == nullptr
               ? 0
               : raw->connection_limiter_->ShutOut(client, until);
  };
  service_options.claim_connection =
      [raw](absl::string_view peer,
            const std::string& identity) -> absl::Status {
    return raw->connection_limiter_ == nullptr
               ? absl::OkStatus()
               : raw->connection_limiter_->ClaimForIdentity(peer, identity);
  };
  server->service_ = std::make_unique<GemmServiceImpl>(
      service_options, server->executor_.get(), server->scheduler_.get());

  ReflectionService::Options reflection;
  reflection.services = {kServiceName, HealthService::kServiceName};
  server->reflection_ = std::make_unique<ReflectionService>(reflection);
  grpc::ServerBuilder builder;
  // TCP addresses get the server's own listener (tcp_acceptor.h); others
  // ("unix:PATH") gRPC's.
  std::vector<std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor>>
      handoffs;
  if (absl::StrContains(options.listen_address, "unix:")) {
    builder.AddListeningPort(options.listen_address, credentials,
                             &server->port_);
  } else {
    server->connection_limiter_ =
        std::make_unique<ConnectionLimiter>(ConnectionLimitsOf(options));
    // Under TLS a refused client cannot be told why in HTTP/2.
    if (options.tls_cert_file.empty())
      server->connection_refuser_ = std::make_unique<ConnectionRefuser>();
    ASSIGN_OR_RETURN(server->acceptor_,
                     TcpAcceptor::Listen(options.listen_address,
                                         server->connection_limiter_.get(),
                                         server->connection_refuser_.get()));
    server->port_ = server->acceptor_->port();
    // Several: gRPC holds a lock per acceptor through each hand-off, and
    // a hand-off can last as long as its client keeps sending (see
    // tcp_acceptor.h).
    for (int i = 0; i < TcpAcceptor::kHandoffs; ++i) {
      handoffs.push_back(builder.experimental().AddExternalConnectionAcceptor(
          grpc::ServerBuilder::experimental_type::ExternalConnectionType::
              FROM_FD,
          credentials));
    }
  }
  builder.RegisterService(server->service_.get());
  builder.RegisterCallbackGenericService(server->service_->unary_calls());
  if (options.max_client_early_cancels > 0) {
    // Gemm and GemmStream count their own early cancels; the other
    // methods' (and unknown ones') are seen by an interceptor.
    GemmServiceImpl* service = server->service_.get();
    builder.experimental().SetInterceptorCreators(MakeEarlyCancelInterceptors(
        GemmServiceImpl::MethodsCountingEarlyCancels(),
        [service](const std::string& peer,
                  std::chrono::system_clock::time_point began,
                  std::chrono::system_clock::time_point deadline) {
          service->NoteEarlyCancel(peer, began, deadline);
        }));
  }
  for (grpc::Service* service : server->reflection_->services()) {
    builder.RegisterService(service);
  }
  const int max_message = static_cast<int>(std::min<uint64_t>(
      options.limits.max_message_bytes, std::numeric_limits<int>::max()));
  builder.SetMaxReceiveMessageSize(max_message);
  builder.SetMaxSendMessageSize(max_message);
  // Optionally, for large jobs: a deeper per-stream window and larger
  // frames than gRPC's (see Options).
  if (options.http2_stream_window_bytes > 0) {
    builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                               options.http2_stream_window_bytes);
  }
  // Transport limits (see Options for what each bounds).
  auto millis = [](absl::Duration d) {
    return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(d),
                                              std::numeric_limits<int>::max()));
  };
  if (options.max_concurrent_streams > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                               options.max_concurrent_streams);
  }
  if (options.max_metadata_bytes > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE,
                               options.max_metadata_bytes);
  }
  if (options.max_connection_idle > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               millis(options.max_connection_idle));
  }
  if (options.max_connection_age > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               millis(options.max_connection_age));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               millis(options.max_connection_age_grace));
  }
  if (options.keepalive_time > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                               millis(options.keepalive_time));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                               millis(options.keepalive_timeout));
  }
  if (!options.http2_bdp_probe) {
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  }
  if (options.http2_max_frame_bytes > 0) {
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE,
                               options.http2_max_frame_bytes);
  }
  if (options.grpc_memory_bytes > 0) {
    grpc::ResourceQuota quota("gemm-server");
    quota.Resize(static_cast<size_t>(options.grpc_memory_bytes));
    builder.SetResourceQuota(quota);
  }
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen_address,
                     " (address in use, or not a valid host:port?)"));
  }
  if (server->acceptor_ != nullptr)
    server->acceptor_->Start(std::move(handoffs));
  server->AddGauges(options);
  if (!options.metrics_listen.empty()) {
    ASSIGN_OR_RETURN(server->metrics_endpoint_,
                     MetricsEndpoint::Start(options.metrics_listen, [self] {
                       return self->RenderMetrics();
                     }));
  }
  return server;
}

int GemmServer::metrics_port() const {
  return metrics_endpoint_ != nullptr ? metrics_endpoint_->port() : 0;
}

std::string GemmServer::RenderMetrics() const {
  return metrics_->registry().Render();
}

void GemmServer::AddGauges(const Options& options) {
  GaugeSources sources;
  sources.executor = executor_.get();
  sources.scheduler = scheduler_.get();
  sources.service = service_.get();
  sources.connections = connection_limiter_.get();
  sources.max_connections = options.max_connections;
  sources.acceptor = acceptor_.get();
  AddServerGauges(metrics_->registry(), sources);
}

}  // namespace gemm::server
