// ShutDownOnSignal: the end of gemm-server's main(). It waits for a
// shutdown signal, then stops the server gracefully (health NOT_SERVING
// for the drain delay, then accepted jobs finishing, within the grace
// period), and bounds how long that may take: a job that never leaves the
// device would hold the shutdown forever, so the process ends
// kShutdownBound after the grace period whatever it waits on.
//
// Thread-safety: call once, from the main thread, with `signals` blocked
// in every thread.
//
//   pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread
//   ... GemmServer::Create(...) ...
//   return ShutDownOnSignal(*server, signals, grace, drain, devices_lost);
#ifndef GEMM_SERVER_APP_SHUTDOWN_ON_SIGNAL_H_
#define GEMM_SERVER_APP_SHUTDOWN_ON_SIGNAL_H_

#include <signal.h>

#include <atomic>

#include "absl/time/time.h"
#include "server/app/gemm_server.h"

namespace gemm::server {

// How long past its grace period a shutdown may take (the scheduler's
// workers finishing a job cancelled too late) before the process just
// exits (_Exit: status 1, or 3 when `devices_lost`).
inline constexpr absl::Duration kShutdownBound = absl::Seconds(5);

// Waits for one of `signals`, shuts `server` down, and returns the
// process's exit status: 0, or 3 when `devices_lost` (every device failed;
// a supervisor should restart the server).
int ShutDownOnSignal(GemmServer& server, const sigset_t& signals,
                     absl::Duration grace, absl::Duration drain_delay,
                     const std::atomic<bool>& devices_lost);

}  // namespace gemm::server

#endif  // GEMM_SERVER_APP_SHUTDOWN_ON_SIGNAL_H_
