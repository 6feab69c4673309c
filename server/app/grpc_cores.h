// The core count gRPC sizes its own thread pools by, as gemm-server sets it
// (--grpc-cores).
//
// gRPC 1.51 asks gpr_cpu_num_cores() and runs every callback service's
// transport reads and reactor callbacks on half that many threads (2 to
// 16), and closures it hands off on an executor of up to twice that many.
// It offers no setting for either. On a 2-core host that is two threads:
// while one client's burst keeps them busy (reading its bytes, setting up
// and tearing down the calls of a rapid reset), every other client's calls
// wait in line behind it, for seconds at a time, instead of sharing the
// cores. This file defines gpr_cpu_num_cores() itself, so that gemm-server's
// binary answers in libgpr's place (the executable's definition comes first
// in the dynamic linker's search), and gRPC sizes its pools as for at least
// kMinGrpcCores cores
// (docs/decisions/0055-grpcs-thread-pools-sized-for-16-cores-two-malloc.md). It
// never answers fewer than the host's cores: gRPC indexes per-core state by the
// CPU a thread runs on.
//
// Only gemm-server links this (the client library leaves its callers'
// gRPC alone).
//
// Thread-safety: SetGrpcCores before gRPC starts its threads (before the
// first grpc:: object); GrpcCores from any thread.
//
//   gemm::server::SetGrpcCores(flag_value);  // 0: the default
//   auto server = GemmServer::Create(options);
//   spdlog::info("gRPC sized for {} cores", gemm::server::GrpcCores());
#ifndef GEMM_SERVER_APP_GRPC_CORES_H_
#define GEMM_SERVER_APP_GRPC_CORES_H_

namespace gemm::server {

// gRPC's pools on a small host: 8 callback threads and an executor of up to
// 32. With 2 callback threads a rapid reset stalled other clients for 3-5 s
// in 6 of 11 runs on a 2-core host; with 8, in none of 9.
inline constexpr unsigned kMinGrpcCores = 16;

// The host's cores as gRPC counts them (configured, not just online).
unsigned HostCores();

// What gpr_cpu_num_cores() answers from now on: `cores`, or with 0 the
// host's cores and at least kMinGrpcCores; never fewer than the host's.
// Pools gRPC has already sized keep their size: its per-core statistics,
// set up as the program loads, have the default's.
void SetGrpcCores(unsigned cores);

// What gpr_cpu_num_cores() answers.
unsigned GrpcCores();

}  // namespace gemm::server

#endif  // GEMM_SERVER_APP_GRPC_CORES_H_
