#include "server/app/grpc_cores.h"

#include <grpc/support/cpu.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

namespace gemm::server {
namespace {

// 0 until SetGrpcCores.
std::atomic<unsigned> g_cores{0};

unsigned DefaultGrpcCores() { return std::max(kMinGrpcCores, HostCores()); }

}  // namespace

unsigned HostCores() {
  // As gRPC's own gpr_cpu_num_cores does.
  const long cores = sysconf(_SC_NPROCESSORS_CONF);
  return cores > 0 ? static_cast<unsigned>(cores) : 1;
}

void SetGrpcCores(unsigned cores) {
  g_cores.store(cores == 0 ? DefaultGrpcCores() : std::max(cores, HostCores()));
}

unsigned GrpcCores() {
  const unsigned cores = g_cores.load();
  return cores != 0 ? cores : DefaultGrpcCores();
}

}  // namespace gemm::server

// gRPC's (grpc/support/cpu.h), in libgpr's place.
unsigned gpr_cpu_num_cores(void) { return gemm::server::GrpcCores(); }
