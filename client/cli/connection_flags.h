// The flags every gemm-client subcommand shares: where the servers are and
// how to reach them (connections, chunking, retries, TLS). Each is bound
// to its GemmClient::Options field, so --help shows the library's defaults.
//
// Thread-safety: call while building the command line, on one thread.
//
//   ConnectionFlags connection;
//   AddConnectionFlags(run, &connection);
//   CLI11_PARSE(app, argc, argv);
//   ASSIGN_OR_RETURN(auto client, Connect(connection));
#ifndef GEMM_CLIENT_CLI_CONNECTION_FLAGS_H_
#define GEMM_CLIENT_CLI_CONNECTION_FLAGS_H_

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "client/lib/gemm_client.h"

namespace gemm::client {

struct ConnectionFlags {
  // --server: host:port, or several separated by commas (round robin).
  std::string servers = GemmClient::Options().target;
  GemmClient::Options options;
};

// Adds the flags to `subcommand`; `flags` must outlive the parse. Several
// subcommands may share one ConnectionFlags (only one of them is parsed).
void AddConnectionFlags(CLI::App* subcommand, ConnectionFlags* flags);

// A client for the parsed flags.
absl::StatusOr<std::unique_ptr<GemmClient>> Connect(
    const ConnectionFlags& flags);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_CONNECTION_FLAGS_H_
