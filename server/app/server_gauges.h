// The gauges /metrics reads at each scrape (docs/reference/metrics.md): build
// and device information, queue and in-flight bytes with their limits, open
// calls and connections, device and pinned memory, device health, and the
// process_* metrics. The counters and histograms the service keeps as it
// goes are ServerMetrics' (server_metrics.h).
//
// Thread-safety: the samplers run on the scraping thread; every source
// must outlive the registry's last Render().
//
//   AddServerGauges(metrics.registry(), {executor, scheduler, service});
#ifndef GEMM_SERVER_APP_SERVER_GAUGES_H_
#define GEMM_SERVER_APP_SERVER_GAUGES_H_

#include <cstddef>

#include "server/core/executor.h"
#include "server/edge/connection_limiter.h"
#include "server/edge/tcp_acceptor.h"
#include "server/observability/metrics.h"
#include "server/rpc/gemm_service.h"
#include "server/scheduling/batch_scheduler.h"

namespace gemm::server {

// What the gauges read.
struct GaugeSources {
  const Executor* executor = nullptr;
  const BatchScheduler* scheduler = nullptr;
  const GemmServiceImpl* service = nullptr;
  // The server's own listener; null for a unix: address (no gauges then).
  ConnectionLimiter* connections = nullptr;
  // --max-connections, reported as the connections' limit.
  size_t max_connections = 0;
  // The listener's hand-offs to gRPC; null for a unix: address.
  TcpAcceptor* acceptor = nullptr;
};

void AddServerGauges(MetricsRegistry& registry, const GaugeSources& sources);

}  // namespace gemm::server

#endif  // GEMM_SERVER_APP_SERVER_GAUGES_H_
