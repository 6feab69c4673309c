#include "server/process_flags.h"

#include <cstdint>

#include "CLI/CLI.hpp"
#include "common/process_tuning.h"
#include "server/grpc_cores.h"

namespace gemm::server {
namespace {

// glibc's trim threshold by backend (--malloc-trim-threshold-mib 0). On
// CUDA, jobs live in pinned blocks and gRPC's buffers are what the heaps
// hold: at 8 MiB the threads' arenas give back their tops after a
// full-size attack (H200 host: 38-50 MiB kept over idle, against 156-176
// at 1024), at 1-11% of 128^3 unary throughput and none on streams. On the
// CPU, jobs' operands are heap blocks that a low threshold gives back and
// faults in again per job: 1024^3 on two cores ran at 13 jobs/s against
// 40-46 (docs/decisions.md 51), 2048^3 at 32 MiB at 3-4 against 5.5-5.8
// (55).
constexpr int kCudaTrimThresholdMib = 8;
constexpr int kCpuTrimThresholdMib = 1024;

// Two arenas per core (--malloc-arenas 0), where glibc allows eight. With
// gRPC's pools sized for 16 cores on a small host (grpc_cores.h), its
// threads spread a burst's buffers over more arenas, whose tops the CPU
// backend's trim threshold keeps: 2-core host, big-unary-unread, 227
// MiB kept after the attack with glibc's 16 arenas, 107 with 8, 42 with 4
// (docs/decisions.md 55). Fewer still (2) cost tail latency under many
// connections on the H200 host (48).
constexpr int kArenasPerCore = 2;

}  // namespace

void AddProcessFlags(CLI::App& app, ProcessSettings& settings) {
  app.add_option("--malloc-arenas", settings.malloc_arenas,
                 "glibc malloc arenas at most (0: two per core; fewer return "
                 "more memory after a burst, at a cost in latency under many "
                 "connections)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--malloc-trim-threshold-mib",
                 settings.malloc_trim_threshold_mib,
                 "free memory at the top of a malloc heap beyond this many "
                 "MiB is given back to the system as large blocks are freed "
                 "(0: the backend's choice, 8 on CUDA, 1024 on the CPU)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--grpc-cores", settings.grpc_cores,
                 "the core count gRPC sizes its thread pools by: it serves "
                 "calls on half as many threads (2 to 16) and hands work off "
                 "to up to twice as many (0: the host's cores, at least 16; "
                 "never fewer than the host's)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

void ApplyBeforeStart(const ProcessSettings& settings) {
  LimitMallocArenas(settings.malloc_arenas > 0
                        ? settings.malloc_arenas
                        : kArenasPerCore * static_cast<int>(HostCores()));
  SetGrpcCores(static_cast<unsigned>(settings.grpc_cores));
}

int ApplyTrimThreshold(const ProcessSettings& settings,
                       absl::string_view backend) {
  int mib = settings.malloc_trim_threshold_mib;
  if (mib == 0) {
    mib = backend == "cuda" ? kCudaTrimThresholdMib : kCpuTrimThresholdMib;
  }
  SetMallocTrimThreshold(uint64_t(mib) << 20);
  return mib;
}

}  // namespace gemm::server
