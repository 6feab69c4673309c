#include "server/app/server_gauges.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/version.h"
#include "server/observability/server_metrics.h"

namespace gemm::server {
namespace {

std::vector<Sample> One(double value) { return {Sample{{}, value}}; }

}  // namespace

void AddServerGauges(MetricsRegistry& registry, const GaugeSources& sources) {
  std::string device_names;
  for (const DeviceDescription& d : sources.executor->devices()) {
    absl::StrAppend(&device_names, device_names.empty() ? "" : ", ", d.id, " ",
                    d.name);
  }
  const std::vector<Sample> build = {
      {{std::string(kVersion), std::string(sources.executor->backend()),
        device_names},
       1}};
  registry.AddGauge(
      "gemm_build_info", "Always 1: the server's version, backend and devices",
      {"version", "backend", "devices"}, [build] { return build; });
  std::vector<Sample> device_bytes;
  for (const DeviceDescription& d : sources.executor->devices()) {
    if (d.memory_bytes == 0) continue;  // the CPU
    device_bytes.push_back({{d.id, d.name, d.compute_capability},
                            static_cast<double>(d.memory_bytes)});
  }
  const Executor* described = sources.executor;
  registry.AddGauge(
      "gemm_device_up",
      "1 while a device serves, 0 once a sticky CUDA error took "
      "it out of service",
      {"device"}, [described] {
        std::vector<Sample> samples;
        for (const DeviceDescription& d : described->devices()) {
          samples.push_back({{d.id}, d.failure.empty() ? 1.0 : 0.0});
        }
        return samples;
      });
  registry.AddSampledCounter(
      "gemm_check_mismatches_total",
      "Results from each device that failed their ABFT check (each was "
      "re-run, never returned); any at all deserves an operator's look",
      {"device"}, [described] {
        std::vector<Sample> samples;
        for (const DeviceDescription& d : described->devices()) {
          samples.push_back({{d.id}, static_cast<double>(d.check_mismatches)});
        }
        return samples;
      });
  registry.AddGauge("gemm_device_memory_total_bytes",
                    "Memory of each device the server computes on",
                    {"device", "name", "compute_capability"},
                    [device_bytes] { return device_bytes; });

  const BatchScheduler* scheduler = sources.scheduler;
  const GemmServiceImpl* service = sources.service;
  registry.AddGauge("gemm_queued_jobs", "Jobs waiting in the queue", {},
                    [scheduler] { return One(scheduler->queued()); });
  registry.AddGauge(
      "gemm_queued_jobs_limit",
      "Most jobs that may wait in the queue (--max-queued-jobs)", {},
      [scheduler] { return One(scheduler->options().max_queued_jobs); });
  registry.AddGauge("gemm_inflight_bytes",
                    "Bytes claimed by accepted, unfinished jobs", {},
                    [service] { return One(service->inflight_bytes()); });
  registry.AddGauge(
      "gemm_inflight_limit_bytes",
      "The in-flight budget (--max-inflight-bytes, at least the largest job)",
      {}, [service] { return One(service->inflight_limit_bytes()); });
  registry.AddGauge("gemm_open_streams", "GemmStream calls open", {},
                    [service] { return One(service->open_streams()); });
  registry.AddGauge("gemm_open_unary_calls", "Unary Gemm calls open", {},
                    [service] { return One(service->open_unary_calls()); });
  registry.AddSampledCounter(
      "gemm_clients_shut_out_total",
      "Clients shut out for cancelling calls before they were read "
      "(--max-client-early-cancels)",
      {}, [service] { return One(service->clients_shut_out()); });
  registry.AddGauge(
      "gemm_unary_requests",
      "Unary Gemm requests being read, and waiting "
      "for their client's turn to be read (--max-client-unary-reads)",
      {"state"}, [service] {
        return std::vector<Sample>{
            {{"reading"}, static_cast<double>(service->unary_calls_reading())},
            {{"waiting"}, static_cast<double>(service->unary_calls_waiting())}};
      });
  registry.AddGauge("gemm_regions", "Shared-memory regions registered, by kind",
                    {"kind"}, [service] {
                      const RegionRegistry::Totals t =
                          service->regions().totals();
                      return std::vector<Sample>{
                          {{"system"}, static_cast<double>(t.system)},
                          {{"cuda-ipc"}, static_cast<double>(t.cuda_ipc)}};
                    });
  registry.AddGauge(
      "gemm_region_bytes", "Bytes of the registered regions, by kind", {"kind"},
      [service] {
        const RegionRegistry::Totals t = service->regions().totals();
        return std::vector<Sample>{
            {{"system"}, static_cast<double>(t.system_bytes)},
            {{"cuda-ipc"}, static_cast<double>(t.cuda_ipc_bytes)}};
      });
  registry.AddGauge(
      "gemm_region_limit_bytes",
      "Most bytes of shared memory regions may hold (--max-region-bytes)", {},
      [service] { return One(service->regions().options().max_system_bytes); });

  const Executor* executor = sources.executor;
  auto device_gauge = [&](std::string name, std::string help,
                          uint64_t MemoryUse::Device::*field) {
    registry.AddGauge(
        std::move(name), std::move(help), {"device"}, [executor, field] {
          std::vector<Sample> samples;
          for (const auto& d : executor->memory_use().devices) {
            samples.push_back({{d.id}, static_cast<double>(d.*field)});
          }
          return samples;
        });
  };
  device_gauge("gemm_device_memory_used_bytes",
               "Device memory held by running batches' operands",
               &MemoryUse::Device::in_use_bytes);
  device_gauge("gemm_device_memory_cached_bytes",
               "Device memory kept for reuse by the operand pool",
               &MemoryUse::Device::cached_bytes);
  device_gauge("gemm_device_memory_budget_bytes",
               "The operand pool's budget on each device",
               &MemoryUse::Device::budget_bytes);
  auto pinned_gauge = [&](std::string name, std::string help,
                          uint64_t MemoryUse::*field) {
    registry.AddGauge(std::move(name), std::move(help), {}, [executor, field] {
      return One(static_cast<double>(executor->memory_use().*field));
    });
  };
  pinned_gauge("gemm_pinned_host_used_bytes",
               "Page-locked host memory held by jobs (CUDA backend)",
               &MemoryUse::pinned_in_use_bytes);
  pinned_gauge("gemm_pinned_host_pool_bytes",
               "Page-locked host memory pinned at start for jobs "
               "(--pinned-pool-bytes)",
               &MemoryUse::pinned_pool_bytes);
  registry.AddSampledCounter(
      "gemm_pinned_host_pageable_blocks_total",
      "Job blocks the pinned pool had no room for, left pageable", {},
      [executor] {
        return One(
            static_cast<double>(executor->memory_use().pinned_pageable_blocks));
      });

  ConnectionLimiter* connections = sources.connections;
  if (connections != nullptr) {
    registry.AddGauge("gemm_connections",
                      "TCP connections open (the server's own listener)", {},
                      [connections] { return One(connections->open()); });
    const double limit = static_cast<double>(sources.max_connections);
    registry.AddGauge("gemm_connections_limit",
                      "Most connections open at once (--max-connections; 0: "
                      "no cap but the descriptor limit's)",
                      {}, [limit] { return One(limit); });
    registry.AddSampledCounter(
        "gemm_connections_refused_total",
        "Connections closed as soon as accepted: over a limit, or too near "
        "the descriptor limit",
        {}, [connections] {
          return One(static_cast<double>(connections->refused()));
        });
  }
  TcpAcceptor* acceptor = sources.acceptor;
  if (acceptor != nullptr) {
    registry.AddGauge(
        "gemm_connection_handoffs", "Connections being handed to gRPC now", {},
        [acceptor] {
          return One(static_cast<double>(acceptor->handoff_counts().running));
        });
    registry.AddSampledCounter(
        "gemm_connection_handoff_seconds_total",
        "Time spent handing connections to gRPC, running hand-offs included: "
        "microseconds a connection, unless a client keeps gRPC reading "
        "inside the hand-off (as a CONTINUATION flood can)",
        {}, [acceptor] { return One(acceptor->handoff_counts().seconds); });
    registry.AddSampledCounter(
        "gemm_connection_handoffs_closed_total",
        "Connections closed instead of handed to gRPC: their client held 16 "
        "hand-offs, or 1024 waited",
        {}, [acceptor] {
          return One(static_cast<double>(acceptor->handoff_counts().closed));
        });
  }
  AddProcessMetrics(registry);
}

}  // namespace gemm::server
