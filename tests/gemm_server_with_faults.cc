// gemm-server-with-faults: gemm-server (RunServerMain) plus one test flag,
// --testing-fail-kernel NAME: jobs that name kernel NAME fail with INTERNAL,
// as a failed device would, on any backend. For the integration tests
// only; production builds have no such flag.
//
//   gemm-server-with-faults --listen 127.0.0.1:0 --testing-fail-kernel broken
#include <memory>
#include <string>
#include <utility>

#include "CLI/CLI.hpp"
#include "server/fault_injecting_executor.h"
#include "server/server_main.h"

int main(int argc, char** argv) {
  using gemm::server::Executor;
  std::string fail_kernel;
  gemm::server::ServerMainExtensions extensions;
  extensions.add_flags = [&fail_kernel](CLI::App& app) {
    app.add_option("--testing-fail-kernel", fail_kernel,
                   "jobs naming this kernel fail with INTERNAL");
  };
  extensions.decorate_executor = [&fail_kernel](std::unique_ptr<Executor> e) {
    if (fail_kernel.empty()) return e;
    return gemm::server::FaultInjectingExecutor::Wrap(std::move(e),
                                                      fail_kernel);
  };
  return gemm::server::RunServerMain(argc, argv, extensions);
}
