// Every flag of gemm-server that sets GemmServer::Options: the listener's
// own (address, backend, connections, HTTP/2, TLS, metrics) here, and those
// of its parts from the flag files beside their Options (limits_flags.h,
// region_flags.h, batching_flags.h, cuda_flags.h). Each flag is bound to
// its field, so the defaults --help shows are the Options' own: the binary
// and a test that builds a GemmServer run the same defaults.
//
// Thread-safety: call while building the command line, on one thread.
//
//   GemmServer::Options options;
//   AddServerFlags(app, &options);
//   CLI11_PARSE(app, argc, argv);
//   ASSIGN_OR_RETURN(auto server, GemmServer::Create(options));
#ifndef GEMM_SERVER_APP_SERVER_FLAGS_H_
#define GEMM_SERVER_APP_SERVER_FLAGS_H_

#include "CLI/CLI.hpp"
#include "server/app/gemm_server.h"

namespace gemm::server {

// `options` must outlive the parse.
void AddServerFlags(CLI::App& app, GemmServer::Options* options);

}  // namespace gemm::server

#endif  // GEMM_SERVER_APP_SERVER_FLAGS_H_
