#include "server/server_main.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/time/time.h"
#include "common/json_log_lines.h"
#include "common/library_logs.h"
#include "common/process_tuning.h"
#include "common/version.h"
#include "server/gemm_server.h"
#include "server/grpc_cores.h"
#include "server/process_flags.h"
#include "server/shutdown_on_signal.h"
#include "server/validation.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

// Writes `port` to `path` (when not empty) in one step: a reader sees the
// whole number or no file.
void WritePortFile(const std::string& path, int port) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << port << "\n";
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace

int RunServerMain(int argc, char** argv,
                  const ServerMainExtensions& extensions) {
  TuneProcess();
  GemmServer::Options options;
  std::string log_level = "info";
  std::string port_file;
  double max_queue_delay_us = 0;
  double shutdown_grace_s = 30;
  double drain_delay_s = 5;
  double check_min_gflop = 0;
  // One client, running at its limits, leaves three quarters of the budget
  // to the others.
  double client_inflight_share = 0.25;
  options.limits.max_client_jobs = 4096;
  options.limits.max_open_jobs_per_stream = 256;
  double job_stall_timeout_s =
      absl::ToDoubleSeconds(options.limits.job_stall_timeout);
  double region_idle_timeout_s =
      absl::ToDoubleSeconds(options.regions.idle_timeout);
  double max_connection_idle_s =
      absl::ToDoubleSeconds(options.max_connection_idle);
  double max_connection_age_s =
      absl::ToDoubleSeconds(options.max_connection_age);
  double max_connection_age_grace_s =
      absl::ToDoubleSeconds(options.max_connection_age_grace);
  double keepalive_time_s = absl::ToDoubleSeconds(options.keepalive_time);
  double keepalive_timeout_s = absl::ToDoubleSeconds(options.keepalive_timeout);
  // 0: the backend's choice (1 on the CPU, devices x streams on CUDA).
  options.batching.num_workers = 0;

  CLI::App app{"gemm-server: SGEMM as a gRPC service (gemm.v1.GemmService)"};
  app.set_version_flag("--version", std::string(kVersion));
  app.add_option("--listen", options.listen_address,
                 "host:port to listen on; port 0 picks a free port")
      ->capture_default_str();
  app.add_option("--backend", options.backend,
                 "auto (CUDA when present, else CPU), cuda or cpu")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->capture_default_str();
  app.add_option("--threads", options.cpu_threads,
                 "OpenBLAS threads per GEMM on the CPU backend (0: OpenBLAS "
                 "default)")
      ->capture_default_str();
  app.add_option("--max-dim", options.limits.max_dim, "largest M, N or K")
      ->capture_default_str();
  app.add_option("--max-job-bytes", options.limits.max_job_bytes,
                 "largest job: bytes of A, B and C together")
      ->capture_default_str();
  app.add_option("--max-inflight-bytes", options.limits.max_inflight_bytes,
                 "bytes of all accepted, unfinished jobs; beyond it new jobs "
                 "get UNAVAILABLE")
      ->capture_default_str();
  app.add_option("--client-inflight-share", client_inflight_share,
                 "part of --max-inflight-bytes one client (address) may hold "
                 "(1: no per-client limit)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--max-client-jobs", options.limits.max_client_jobs,
                 "jobs one client may hold, declared and not yet answered, "
                 "and as many answers not yet sent, plus 64 (0: no "
                 "limit)")
      ->capture_default_str();
  app.add_option("--max-open-jobs-per-stream",
                 options.limits.max_open_jobs_per_stream,
                 "jobs of one stream being received at once (0: no limit)")
      ->capture_default_str();
  app.add_option(
         "--check-min-gflop", check_min_gflop,
         "check the result (ABFT row and column checksums; a result that "
         "fails is re-run, never returned) of every job of at least this "
         "many GFLOP (2*M*N*K/1e9) that does not opt out with "
         "params.check; 0: only jobs that ask")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-message-bytes", options.limits.max_message_bytes,
                 "largest gRPC message received or sent (a unary result "
                 "included)")
      ->capture_default_str();
  std::string regions = "local";
  app.add_option("--regions", regions,
                 "who may register shared-memory regions: local (callers at "
                 "a loopback address or on a Unix socket), any (any address: "
                 "containers on one host) or off")
      ->check(CLI::IsMember({"local", "any", "off"}))
      ->capture_default_str();
  app.add_option("--region-key-prefix", options.regions.key_prefix,
                 "the server opens only shared-memory objects whose names "
                 "start with this")
      ->capture_default_str();
  app.add_option("--max-region-bytes", options.regions.max_system_bytes,
                 "bytes of all shared-memory regions together (0: half the "
                 "host's physical memory)")
      ->capture_default_str();
  app.add_option("--max-regions-per-client",
                 options.regions.max_regions_per_owner,
                 "shared-memory regions one client may have registered at "
                 "once")
      ->capture_default_str();
  app.add_option("--region-idle-timeout-s", region_idle_timeout_s,
                 "a region no job or call of its owner used for this long is "
                 "unregistered by the server (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--job-stall-timeout-s", job_stall_timeout_s,
                 "a streamed job that gets no data for this long fails with "
                 "DEADLINE_EXCEEDED and gives back its budget (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--result-chunk-bytes", options.limits.result_chunk_bytes,
                 "size of result chunks on GemmStream; at most "
                 "--max-message-bytes less 1024 (a result message's header)")
      ->capture_default_str();
  app.add_option("--http2-stream-window-bytes",
                 options.http2_stream_window_bytes,
                 "HTTP/2 flow-control window per stream: bytes a client may "
                 "send ahead of the server's reads (0: gRPC's default)")
      ->capture_default_str();
  app.add_option("--http2-bdp-probe", options.http2_bdp_probe,
                 "let gRPC grow HTTP/2 windows to the link's bandwidth-delay "
                 "product, whether or not the server reads (false: "
                 "read-ahead stays near the window and memory near "
                 "--max-inflight-bytes, at about half the throughput)")
      ->capture_default_str();
  app.add_option("--max-concurrent-streams", options.max_concurrent_streams,
                 "calls open at once on one connection; more wait for a slot "
                 "(0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--tls-cert", options.tls_cert_file,
                 "TLS: the server's certificate chain (PEM file); with "
                 "--tls-key (default: plaintext)");
  app.add_option("--tls-key", options.tls_key_file,
                 "TLS: the certificate's private key (PEM file)");
  app.add_option("--tls-client-ca", options.tls_client_ca_file,
                 "mTLS: clients must present a certificate signed by a CA "
                 "in this PEM file");
  app.add_option("--token-file", options.token_file,
                 "every GemmService call must carry one of these bearer "
                 "tokens (lines \"NAME TOKEN\"); health and reflection do "
                 "not ask");
  app.add_option("--max-connections", options.max_connections,
                 "connections open at once; more are closed when accepted "
                 "(0: no cap but the open-file limit's)")
      ->capture_default_str();
  app.add_option("--max-client-connections", options.max_connections_per_client,
                 "connections open at once from one client: its address, or "
                 "its token's or certificate's name with --token-file or "
                 "--tls-client-ca (counted at each connection's first call); "
                 "a refused client's calls fail with RESOURCE_EXHAUSTED and "
                 "the reason (0: no cap)")
      ->capture_default_str();
  app.add_option("--max-address-connections",
                 options.max_connections_per_address,
                 "with --token-file or --tls-client-ca, connections open at "
                 "once from one address, which the clients behind a NAT or "
                 "load balancer share (0: no cap)")
      ->capture_default_str();
  app.add_option("--max-client-early-cancels", options.max_client_early_cancels,
                 "calls a client address may cancel before their requests "
                 "are read, refilling a tenth a second; past it (HTTP/2 "
                 "rapid reset) its connections are closed and new ones "
                 "refused for --shut-out-s (0: no limit)")
      ->capture_default_str();
  app.add_option("--shut-out-s", options.shut_out_s,
                 "how long a client past --max-client-early-cancels is "
                 "refused")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--grpc-memory-bytes", options.grpc_memory_bytes,
                 "gRPC's resource quota: buffers its transport may hold "
                 "before it cancels streams to get back under (0: none)")
      ->capture_default_str();
  app.add_option("--max-client-unary-reads", options.max_client_unary_reads,
                 "unary requests of one client read at once; its other "
                 "unary calls wait unread (0: a quarter of "
                 "--grpc-memory-bytes in messages of --max-message-bytes, "
                 "at least 1)")
      ->capture_default_str();
  app.add_option("--max-metadata-bytes", options.max_metadata_bytes,
                 "largest request metadata (headers) (0: gRPC's 8 KiB)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-connection-idle-s", max_connection_idle_s,
                 "close a connection without calls after this long (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-connection-age-s", max_connection_age_s,
                 "ask a connection older than this to go away; its calls get "
                 "--max-connection-age-grace-s (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-connection-age-grace-s", max_connection_age_grace_s,
                 "see --max-connection-age-s")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--keepalive-time-s", keepalive_time_s,
                 "ping a quiet connection after this long, and close it when "
                 "no answer comes in --keepalive-timeout-s (0: no pings)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--keepalive-timeout-s", keepalive_timeout_s,
                 "see --keepalive-time-s")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--http2-max-frame-bytes", options.http2_max_frame_bytes,
                 "largest HTTP/2 frame accepted, 16384..16777215 (0: gRPC's "
                 "default)")
      ->check(CLI::Range(0, 16777215))
      ->capture_default_str();
  app.add_option("--max-queued-jobs", options.batching.max_queued_jobs,
                 "jobs that may wait, three quarters of them at most one "
                 "client's; beyond that new jobs get UNAVAILABLE")
      ->capture_default_str();
  app.add_option("--max-batch-size", options.batching.max_batch_size,
                 "most jobs in one batch")
      ->capture_default_str();
  app.add_option("--max-queue-delay-us", max_queue_delay_us,
                 "longest a job waits for others to join its batch")
      ->capture_default_str();
  app.add_option("--workers", options.batching.num_workers,
                 "batches executing at once; 0: the backend's choice (2 on "
                 "the CPU, one of them for light jobs only; devices x "
                 "streams-per-device on CUDA)")
      ->capture_default_str();
  app.add_option("--devices", options.cuda.devices,
                 "CUDA devices to use, e.g. 0,1 (default: all visible)")
      ->delimiter(',');
  app.add_option("--streams-per-device", options.cuda.streams_per_device,
                 "CUDA streams per device: batches in flight on each GPU")
      ->capture_default_str();
  app.add_option("--coalesce-small-writes", options.coalesce_small_writes,
                 "let small stream messages queued back to back share a "
                 "socket write (gRPC buffer hint); such a message leaves only "
                 "when the connection next writes for another reason, so on "
                 "a quiet connection it can wait")
      ->capture_default_str();
  app.add_option("--cuda-blocking-sync", options.cuda.blocking_sync,
                 "CUDA workers sleep until their batch is done (false: they "
                 "spin, a core each)")
      ->capture_default_str();
  app.add_option("--device-memory-budget-bytes",
                 options.cuda.device_memory_budget_bytes,
                 "device memory per GPU for operands (0: 90% of the free "
                 "memory at start); larger jobs get RESOURCE_EXHAUSTED")
      ->capture_default_str();
  app.add_option("--pinned-pool-bytes", options.cuda.pinned_pool_bytes,
                 "page-locked host memory pinned at start for jobs' operands "
                 "(at most --max-inflight-bytes; 0: none); what does not fit "
                 "stays pageable")
      ->capture_default_str();
  app.add_option("--max-pinned-block-bytes",
                 options.cuda.max_pinned_block_bytes,
                 "largest operand block taken from the pinned pool; larger "
                 "ones stay pageable (0: no limit)")
      ->capture_default_str();
  app.add_option("--calibrate", options.cuda.calibrate,
                 "measure v5 vs cuBLAS at start for kernel=auto (false: auto "
                 "runs cuBLAS)")
      ->capture_default_str();
  app.add_option("--dispatch-cache", options.cuda.dispatch_cache,
                 "file the dispatch table is loaded from if it holds one for "
                 "this GPU, else saved to after calibrating");
  app.add_option("--shutdown-grace-s", shutdown_grace_s,
                 "on SIGINT/SIGTERM, how long the shutdown may take in all: "
                 "the drain delay, then accepted jobs finishing; calls still "
                 "open then are cancelled")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--drain-delay-s", drain_delay_s,
                 "on SIGINT/SIGTERM, how long health reports NOT_SERVING "
                 "while everything is still served, so that load balancers "
                 "stop sending; part of --shutdown-grace-s")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--port-file", port_file,
                 "write the listening port to this file once serving");
  app.add_option("--metrics-listen", options.metrics_listen,
                 "serve Prometheus metrics at http://HOST:PORT/metrics "
                 "(IPv4 HOST, or [::] for every interface; port 0 picks "
                 "one); empty: no metrics endpoint")
      ->capture_default_str();
  std::string metrics_port_file;
  app.add_option("--metrics-port-file", metrics_port_file,
                 "write the metrics endpoint's port to this file once "
                 "serving");
  app.add_option("--log-level", log_level,
                 "trace, debug, info, warn, error or off")
      ->capture_default_str();
  std::string log_format = "text";
  app.add_option("--log-format", log_format,
                 "text, or json: one JSON object per line (time, level, msg)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  ProcessSettings process;
  AddProcessFlags(app, process);
  if (extensions.add_flags) extensions.add_flags(app);
  CLI11_PARSE(app, argc, argv);
  options.decorate_executor = extensions.decorate_executor;

  spdlog::set_level(spdlog::level::from_str(log_level));
  if (log_format == "json") UseJsonLogLines();
  // protobuf's and gRPC's own lines obey --log-level (and the format) too,
  // rate-limited.
  RouteLibraryLogs();
  // Before the server starts its threads, and gRPC its pools.
  ApplyBeforeStart(process);
  if (drain_delay_s > shutdown_grace_s) {
    spdlog::critical(
        "cannot start: --drain-delay-s ({}) must not exceed "
        "--shutdown-grace-s ({}): the drain is part of the grace period",
        drain_delay_s, shutdown_grace_s);
    return 1;
  }
  options.batching.max_queue_delay = absl::Microseconds(max_queue_delay_us);
  options.limits.job_stall_timeout = absl::Seconds(job_stall_timeout_s);
  options.regions.idle_timeout = absl::Seconds(region_idle_timeout_s);
  options.regions.registrants =
      regions == "off"   ? RegionRegistry::Registrants::kNone
      : regions == "any" ? RegionRegistry::Registrants::kAny
                         : RegionRegistry::Registrants::kLocal;
  options.limits.check_min_flops = check_min_gflop * 1e9;
  // Jobs' pinned blocks count against the in-flight budget: a pool larger
  // than the budget could never be used.
  options.cuda.pinned_pool_bytes = std::min(
      options.cuda.pinned_pool_bytes, InflightBudgetBytes(options.limits));
  // Never below the largest job's claim (JobIntake raises it).
  options.limits.max_client_inflight_bytes =
      client_inflight_share >= 1.0
          ? 0
          : std::max<uint64_t>(
                1, static_cast<uint64_t>(client_inflight_share *
                                         options.limits.max_inflight_bytes));
  options.max_connection_idle = absl::Seconds(max_connection_idle_s);
  options.max_connection_age = absl::Seconds(max_connection_age_s);
  options.max_connection_age_grace = absl::Seconds(max_connection_age_grace_s);
  options.keepalive_time = absl::Seconds(keepalive_time_s);
  options.keepalive_timeout = absl::Seconds(keepalive_timeout_s);
  // Every connection takes a descriptor; a server at its limit cannot
  // accept, so take what the hard limit allows.
  const uint64_t open_files = RaiseOpenFileLimit();

  // Block the shutdown signals in every thread; main waits for them below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // Every device failed: stop as on SIGTERM (drain, finish what can be
  // finished), then exit non-zero so that a supervisor restarts the server.
  std::atomic<bool> devices_lost{false};
  options.on_fatal = [&devices_lost](const absl::Status&) {
    devices_lost.store(true);
    kill(getpid(), SIGTERM);
  };
  const int malloc_trim_threshold_mib = ApplyTrimThreshold(process);
  auto server = GemmServer::Create(options);
  if (!server.ok()) {
    spdlog::critical("cannot start: {}", server.status().ToString());
    return 1;
  }
  const auto devices = (*server)->executor().devices();
  spdlog::info(
      "gemm-server {} listening on port {} (backend {}, device {}; up to {} "
      "open files; malloc trim threshold {} MiB; gRPC sized for {} cores; "
      "{}{})",
      kVersion, (*server)->port(), std::string((*server)->executor().backend()),
      devices.empty() ? "none" : devices.front().name, open_files,
      malloc_trim_threshold_mib, GrpcCores(),
      options.tls_cert_file.empty()
          ? "plaintext"
          : (options.tls_client_ca_file.empty() ? "TLS" : "mTLS"),
      options.token_file.empty() ? "" : ", tokens");
  if (check_min_gflop > 0) {
    spdlog::info(
        "result checks (ABFT) for jobs of at least {} GFLOP, and for any job "
        "that asks",
        check_min_gflop);
  }
  if ((*server)->metrics_port() != 0) {
    spdlog::info("metrics at http://{}/metrics (port {})",
                 options.metrics_listen, (*server)->metrics_port());
  }
  WritePortFile(metrics_port_file, (*server)->metrics_port());
  // Last: a script waiting for the port file finds everything up.
  WritePortFile(port_file, (*server)->port());

  return ShutDownOnSignal(**server, signals, absl::Seconds(shutdown_grace_s),
                          absl::Seconds(drain_delay_s), devices_lost);
}

}  // namespace gemm::server
