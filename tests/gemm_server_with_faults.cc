// gemm-server-with-faults: gemm-server (RunServerMain) plus two test flags,
// on any backend: --testing-fail-kernel NAME (jobs that name kernel NAME
// fail with INTERNAL, as a failed device would) and --testing-stuck-kernel
// NAME (jobs that name it hold their worker for --testing-stuck-s, 600 by
// default, deaf to cancellation, as a hung device would). For the integration
// tests only; production builds have no such flags.
//
//   gemm-server-with-faults --listen 127.0.0.1:0 --testing-fail-kernel broken
#include <memory>
#include <string>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/time/time.h"
#include "server/fault_injecting_executor.h"
#include "server/server_main.h"

int main(int argc, char** argv) {
  using gemm::server::Executor;
  using gemm::server::FaultInjectingExecutor;
  FaultInjectingExecutor::Options faults;
  double stuck_s = 600;
  gemm::server::ServerMainExtensions extensions;
  extensions.add_flags = [&faults, &stuck_s](CLI::App& app) {
    app.add_option("--testing-fail-kernel", faults.fail_kernel,
                   "jobs naming this kernel fail with INTERNAL");
    app.add_option("--testing-stuck-kernel", faults.stuck_kernel,
                   "jobs naming this kernel hold their worker for "
                   "--testing-stuck-s, deaf to cancellation, then fail with "
                   "INTERNAL");
    app.add_option("--testing-stuck-s", stuck_s, "see --testing-stuck-kernel")
        ->capture_default_str();
  };
  extensions.decorate_executor = [&](std::unique_ptr<Executor> e) {
    if (faults.fail_kernel.empty() && faults.stuck_kernel.empty()) return e;
    faults.stuck_for = absl::Seconds(stuck_s);
    return FaultInjectingExecutor::Wrap(std::move(e), faults);
  };
  return gemm::server::RunServerMain(argc, argv, extensions);
}
