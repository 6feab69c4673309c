#include "server/app/server_flags.h"

#include <string>

#include "common/cli_options.h"
#include "server/admission/limits_flags.h"
#include "server/cuda/cuda_flags.h"
#include "server/regions/region_flags.h"
#include "server/scheduling/batching_flags.h"

namespace gemm::server {
namespace {

void AddListenerFlags(CLI::App& app, GemmServer::Options* options) {
  const std::string group = "Listener";
  app.add_option("--listen", options->listen_address,
                 "host:port to listen on; port 0 picks a free port")
      ->capture_default_str()
      ->group(group);
  app.add_option("--backend", options->backend,
                 "auto (CUDA when present, else CPU), cuda or cpu")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->capture_default_str()
      ->group(group);
  app.add_option("--threads", options->cpu_threads,
                 "OpenBLAS threads per GEMM on the CPU backend (0: OpenBLAS "
                 "default)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--metrics-listen", options->metrics_listen,
                 "serve Prometheus metrics at http://HOST:PORT/metrics "
                 "(IPv4 HOST, or [::] for every interface; port 0 picks "
                 "one); empty: no metrics endpoint")
      ->capture_default_str()
      ->group(group);
}

void AddSecurityFlags(CLI::App& app, GemmServer::Options* options) {
  const std::string group = "TLS and tokens";
  app.add_option("--tls-cert", options->tls_cert_file,
                 "TLS: the server's certificate chain (PEM file); with "
                 "--tls-key (default: plaintext)")
      ->group(group);
  app.add_option("--tls-key", options->tls_key_file,
                 "TLS: the certificate's private key (PEM file)")
      ->group(group);
  app.add_option("--tls-client-ca", options->tls_client_ca_file,
                 "mTLS: clients must present a certificate signed by a CA "
                 "in this PEM file")
      ->group(group);
  app.add_option("--token-file", options->token_file,
                 "every GemmService call must carry one of these bearer "
                 "tokens (lines \"NAME TOKEN\"); health and reflection do "
                 "not ask")
      ->group(group);
}

void AddConnectionFlags(CLI::App& app, GemmServer::Options* options) {
  const std::string group = "Connections";
  app.add_option("--max-connections", options->max_connections,
                 "connections open at once; more are closed when accepted "
                 "(0: no cap but the open-file limit's)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--max-client-connections",
                 options->max_connections_per_client,
                 "connections open at once from one client: its address, or "
                 "its token's or certificate's name with --token-file or "
                 "--tls-client-ca (counted at each connection's first call); "
                 "a refused client's calls fail with RESOURCE_EXHAUSTED and "
                 "the reason (0: no cap)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--max-address-connections",
                 options->max_connections_per_address,
                 "with --token-file or --tls-client-ca, connections open at "
                 "once from one address, which the clients behind a NAT or "
                 "load balancer share (0: no cap)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--max-client-early-cancels",
                 options->max_client_early_cancels,
                 "calls a client address may cancel before their requests "
                 "are read, refilling a tenth a second; past it (HTTP/2 "
                 "rapid reset) its connections are closed and new ones "
                 "refused for --shut-out-s (0: no limit)")
      ->capture_default_str()
      ->group(group);
  AddSecondsOption(app, "--shut-out-s", &options->shut_out_for,
                   "how long a client past --max-client-early-cancels is "
                   "refused")
      ->check(CLI::Range(0.0, 86400.0))
      ->group(group);
  app.add_option("--max-client-unary-reads", options->max_client_unary_reads,
                 "unary requests of one client read at once; its other "
                 "unary calls wait unread (0: a quarter of "
                 "--grpc-memory-bytes in messages of --max-message-bytes, "
                 "at least 1)")
      ->capture_default_str()
      ->group(group);
  AddSecondsOption(app, "--max-connection-idle-s",
                   &options->max_connection_idle,
                   "close a connection without calls after this long (0: "
                   "never)")
      ->group(group);
  AddSecondsOption(app, "--max-connection-age-s", &options->max_connection_age,
                   "ask a connection older than this to go away; its calls "
                   "get --max-connection-age-grace-s (0: no limit)")
      ->group(group);
  AddSecondsOption(app, "--max-connection-age-grace-s",
                   &options->max_connection_age_grace,
                   "see --max-connection-age-s")
      ->group(group);
  AddSecondsOption(app, "--keepalive-time-s", &options->keepalive_time,
                   "ping a quiet connection after this long, and close it "
                   "when no answer comes in --keepalive-timeout-s (0: no "
                   "pings)")
      ->group(group);
  AddSecondsOption(app, "--keepalive-timeout-s", &options->keepalive_timeout,
                   "see --keepalive-time-s")
      ->group(group);
}

void AddHttp2Flags(CLI::App& app, GemmServer::Options* options) {
  const std::string group = "HTTP/2 and gRPC";
  app.add_option("--http2-stream-window-bytes",
                 options->http2_stream_window_bytes,
                 "HTTP/2 flow-control window per stream: bytes a client may "
                 "send ahead of the server's reads (0: gRPC's default)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--http2-bdp-probe", options->http2_bdp_probe,
                 "let gRPC grow HTTP/2 windows to the link's bandwidth-delay "
                 "product, whether or not the server reads (false: "
                 "read-ahead stays near the window and memory near "
                 "--max-inflight-bytes, at about half the throughput)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--max-concurrent-streams", options->max_concurrent_streams,
                 "calls open at once on one connection; more wait for a slot "
                 "(0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str()
      ->group(group);
  app.add_option("--http2-max-frame-bytes", options->http2_max_frame_bytes,
                 "largest HTTP/2 frame accepted, 16384..16777215 (0: gRPC's "
                 "default)")
      ->check(CLI::Range(0, 16777215))
      ->capture_default_str()
      ->group(group);
  app.add_option("--max-metadata-bytes", options->max_metadata_bytes,
                 "largest request metadata (headers) (0: gRPC's 8 KiB)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str()
      ->group(group);
  app.add_option("--grpc-memory-bytes", options->grpc_memory_bytes,
                 "gRPC's resource quota: buffers its transport may hold "
                 "before it cancels streams to get back under (0: none)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--coalesce-small-writes", options->coalesce_small_writes,
                 "let small stream messages queued back to back share a "
                 "socket write (gRPC buffer hint); such a message leaves only "
                 "when the connection next writes for another reason, so on "
                 "a quiet connection it can wait")
      ->capture_default_str()
      ->group(group);
}

}  // namespace

void AddServerFlags(CLI::App& app, GemmServer::Options* options) {
  AddListenerFlags(app, options);
  AddServiceLimitsFlags(app, &options->limits);
  AddRegionFlags(app, &options->regions);
  AddConnectionFlags(app, options);
  AddHttp2Flags(app, options);
  AddSecurityFlags(app, options);
  AddBatchingFlags(app, &options->batching);
  AddCudaFlags(app, &options->cuda);
}

}  // namespace gemm::server
