#include "server/app/shutdown_on_signal.h"

#include <cstdlib>
#include <thread>

#include "absl/synchronization/notification.h"
#include "spdlog/spdlog.h"

namespace gemm::server {

int ShutDownOnSignal(GemmServer& server, const sigset_t& signals,
                     absl::Duration grace, absl::Duration drain_delay,
                     const std::atomic<bool>& devices_lost) {
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info(
      "signal {}: health NOT_SERVING; serving {} s more (--drain-delay-s), "
      "then finishing accepted jobs; exiting within {} s "
      "(--shutdown-grace-s)",
      signal_number, absl::ToDoubleSeconds(drain_delay),
      absl::ToDoubleSeconds(grace));
  absl::Notification shut_down;
  std::thread watchdog([&] {
    const absl::Duration bound = grace + kShutdownBound;
    if (shut_down.WaitForNotificationWithTimeout(bound)) return;
    spdlog::error(
        "shutdown not done {} s after the signal (grace {} s): a job is "
        "still in the executor; exiting without it",
        absl::ToDoubleSeconds(bound), absl::ToDoubleSeconds(grace));
    spdlog::shutdown();
    std::_Exit(devices_lost.load() ? 3 : 1);
  });
  const GemmServer::ShutdownReport report = server.Shutdown(grace, drain_delay);
  shut_down.Notify();
  watchdog.join();
  if (report.clean()) {
    spdlog::info("shut down cleanly: {}", report.ToString());
  } else {
    spdlog::warn("shut down: {}", report.ToString());
  }
  if (devices_lost.load()) {
    spdlog::critical(
        "exiting with status 3: every device failed (Info and the log say "
        "how); restart the server, or take the host out of service");
    return 3;
  }
  return 0;
}

}  // namespace gemm::server
