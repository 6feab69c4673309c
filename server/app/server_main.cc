#include "server/app/server_main.h"

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
#include "common/cli_options.h"
#include "common/json_log_lines.h"
#include "common/library_logs.h"
#include "common/process_tuning.h"
#include "common/version.h"
#include "server/admission/validation.h"
#include "server/app/gemm_server.h"
#include "server/app/grpc_cores.h"
#include "server/app/process_flags.h"
#include "server/app/server_flags.h"
#include "server/app/shutdown_on_signal.h"
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

// The flags of the process itself, beside the server's (server_flags.h).
struct MainFlags {
  std::string log_level = "info";
  std::string log_format = "text";
  std::string port_file;
  std::string metrics_port_file;
  absl::Duration shutdown_grace = absl::Seconds(30);
  absl::Duration drain_delay = absl::Seconds(5);
};

void AddMainFlags(CLI::App& app, MainFlags* flags) {
  const std::string group = "Process";
  AddSecondsOption(app, "--shutdown-grace-s", &flags->shutdown_grace,
                   "on SIGINT/SIGTERM, how long the shutdown may take in all: "
                   "the drain delay, then accepted jobs finishing; calls "
                   "still open then are cancelled")
      ->group(group);
  AddSecondsOption(app, "--drain-delay-s", &flags->drain_delay,
                   "on SIGINT/SIGTERM, how long health reports NOT_SERVING "
                   "while everything is still served, so that load balancers "
                   "stop sending; part of --shutdown-grace-s")
      ->group(group);
  app.add_option("--port-file", flags->port_file,
                 "write the listening port to this file once serving")
      ->group(group);
  app.add_option("--metrics-port-file", flags->metrics_port_file,
                 "write the metrics endpoint's port to this file once "
                 "serving")
      ->group(group);
  app.add_option("--log-level", flags->log_level,
                 "trace, debug, info, warn, error or off")
      ->capture_default_str()
      ->group(group);
  app.add_option("--log-format", flags->log_format,
                 "text, or json: one JSON object per line (time, level, msg)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str()
      ->group(group);
}

}  // namespace

int RunServerMain(int argc, char** argv,
                  const ServerMainExtensions& extensions) {
  TuneProcess();
  GemmServer::Options options;
  MainFlags flags;
  CLI::App app{"gemm-server: SGEMM as a gRPC service (gemm.v1.GemmService)"};
  app.set_version_flag("--version", std::string(kVersion));
  AddServerFlags(app, &options);
  AddMainFlags(app, &flags);
  ProcessSettings process;
  AddProcessFlags(app, process);
  if (extensions.add_flags) extensions.add_flags(app);
  CLI11_PARSE(app, argc, argv);
  options.decorate_executor = extensions.decorate_executor;

  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  if (flags.log_format == "json") UseJsonLogLines();
  // protobuf's and gRPC's own lines obey --log-level (and the format) too,
  // rate-limited.
  RouteLibraryLogs();
  // Before the server starts its threads, and gRPC its pools.
  ApplyBeforeStart(process);
  if (flags.drain_delay > flags.shutdown_grace) {
    spdlog::critical(
        "cannot start: --drain-delay-s ({}) must not exceed "
        "--shutdown-grace-s ({}): the drain is part of the grace period",
        absl::ToDoubleSeconds(flags.drain_delay),
        absl::ToDoubleSeconds(flags.shutdown_grace));
    return 1;
  }
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
  if (options.limits.check_min_flops > 0) {
    spdlog::info(
        "result checks (ABFT) for jobs of at least {} GFLOP, and for any job "
        "that asks",
        options.limits.check_min_flops / 1e9);
  }
  if ((*server)->metrics_port() != 0) {
    spdlog::info("metrics at http://{}/metrics (port {})",
                 options.metrics_listen, (*server)->metrics_port());
  }
  WritePortFile(flags.metrics_port_file, (*server)->metrics_port());
  // Last: a script waiting for the port file finds everything up.
  WritePortFile(flags.port_file, (*server)->port());

  return ShutDownOnSignal(**server, signals, flags.shutdown_grace,
                          flags.drain_delay, devices_lost);
}

}  // namespace gemm::server
