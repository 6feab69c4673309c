#include "server/app/process_flags.h"

#include <cstdint>

#include "CLI/CLI.hpp"
#include "common/process_tuning.h"
#include "server/app/grpc_cores.h"

namespace gemm::server {
namespace {

// glibc's trim threshold (--malloc-trim-threshold-mib 0), on both
// backends: free memory at a heap's top stays for the next large block
// while jobs run, and the server gives it back once quiet
// (heap_release.h). At 8 MiB on CUDA (decision 51) every large gRPC
// buffer's pages were given back on free and faulted in again: on the H200
// host 1024^3 jobs ran at 471 jobs/s against 970 at 1024, 4096^3 at 32.7
// against 48.9 (decision 56). On the CPU, jobs' operands are heap blocks
// too: 1024^3 on two cores ran at 13 jobs/s at 8 against 40-46.
constexpr int kTrimThresholdMib = 1024;

// Two arenas per core (--malloc-arenas 0), where glibc allows eight. With
// gRPC's pools sized for 16 cores on a small host (grpc_cores.h), its
// threads spread a burst's buffers over more arenas, whose tops the CPU
// backend's trim threshold keeps: 2-core host, big-unary-unread, 227
// MiB kept after the attack with glibc's 16 arenas, 107 with 8, 42 with 4
// (docs/decisions/0055-grpcs-thread-pools-sized-for-16-cores-two-malloc.md).
// Fewer still (2) cost tail latency under many connections on the H200 host
// (48).
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
                 "(0: 1024; the server gives it back anyway once it has "
                 "been quiet for half a second)")
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

int ApplyTrimThreshold(const ProcessSettings& settings) {
  int mib = settings.malloc_trim_threshold_mib;
  if (mib == 0) mib = kTrimThresholdMib;
  SetMallocTrimThreshold(uint64_t(mib) << 20);
  return mib;
}

}  // namespace gemm::server
