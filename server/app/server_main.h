// RunServerMain: gemm-server's main(): turns flags into GemmServer::Options,
// runs the server and shuts it down gracefully on SIGINT or SIGTERM.
//
// It is a library function so that a test build of the server
// (//tests:gemm-server-with-faults) is the same program plus its own flags
// and an executor decorator, never a second copy of the flag parsing.
//
// Thread-safety: call once, from main().
//
//   int main(int argc, char** argv) {
//     return gemm::server::RunServerMain(argc, argv);
//   }
#ifndef GEMM_SERVER_APP_SERVER_MAIN_H_
#define GEMM_SERVER_APP_SERVER_MAIN_H_

#include <functional>

#include "server/core/executor.h"

namespace CLI {
class App;
}  // namespace CLI

namespace gemm::server {

// What a test build of gemm-server adds to it. Default: nothing.
struct ServerMainExtensions {
  // Registers extra flags, parsed with the others.
  std::function<void(CLI::App& app)> add_flags;
  // Wraps the executor, after the flags are parsed; see
  // GemmServer::Options::decorate_executor.
  ExecutorDecorator decorate_executor;
};

// Returns the process's exit code: 0 after a clean shutdown, 1 when the
// server cannot start, CLI11's code for bad flags (and 0 for --help).
int RunServerMain(int argc, char** argv,
                  const ServerMainExtensions& extensions = {});

}  // namespace gemm::server

#endif  // GEMM_SERVER_APP_SERVER_MAIN_H_
