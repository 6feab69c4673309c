// gemm-server's process-wide settings, as flags: glibc's malloc arenas and
// trim threshold, and the core count gRPC sizes its own thread pools by.
// Each is made once, before the server starts; common/process_tuning.h and
// server/app/grpc_cores.h say why each matters and how it was measured.
//
// Thread-safety: call from main(), in the order below.
//
//   ProcessSettings settings;
//   AddProcessFlags(app, settings);
//   CLI11_PARSE(app, argc, argv);
//   ApplyBeforeStart(settings);               // before any thread or gRPC
//   int mib = ApplyTrimThreshold(settings);
//   auto server = GemmServer::Create(options);
#ifndef GEMM_SERVER_APP_PROCESS_FLAGS_H_
#define GEMM_SERVER_APP_PROCESS_FLAGS_H_

namespace CLI {
class App;
}  // namespace CLI

namespace gemm::server {

struct ProcessSettings {
  // At most this many malloc arenas; 0: two per core of the host.
  int malloc_arenas = 0;
  // glibc's trim threshold in MiB; 0: 1024.
  int malloc_trim_threshold_mib = 0;
  // The cores gRPC sizes its pools by; 0: the host's, at least 16.
  int grpc_cores = 0;
};

// Registers --malloc-arenas, --malloc-trim-threshold-mib and --grpc-cores.
void AddProcessFlags(CLI::App& app, ProcessSettings& settings);

// The arenas and gRPC's core count. Before the server starts any thread.
void ApplyBeforeStart(const ProcessSettings& settings);

// The trim threshold; returns the MiB now in force.
int ApplyTrimThreshold(const ProcessSettings& settings);

}  // namespace gemm::server

#endif  // GEMM_SERVER_APP_PROCESS_FLAGS_H_
