// gemm-client's command line: subcommands info, health, run, load and
// kernels, each turning its flags into options for the client libraries
// (info_text.h, run_command.h, load_cli.h, kernel_table.h); the flags they
// share are connection_flags.h's.
//
//   gemm-client info --server localhost:50051
//   gemm-client run --server localhost:50051 -m 1000 -n 999 -k 777 --verify
//   gemm-client run --a a.npy --b b.npy --out c.npy --kernel cublas
//   gemm-client load --server h1:50051,h2:50051 --concurrency 64
//   gemm-client kernels --server localhost:50051 -m 4096 -n 4096 -k 4096
//
// Thread-safety: call once, from main.
#ifndef GEMM_CLIENT_CLI_CLIENT_MAIN_H_
#define GEMM_CLIENT_CLI_CLIENT_MAIN_H_

namespace gemm::client {

// Parses argv and runs the subcommand; returns the exit status: 0, 1 for
// an error (printed on stderr), 2 for a wrong result or a failed kernel,
// 4 for a load test refused by the server (load_cli.h), CLI11's codes for
// bad flags.
int RunClientMain(int argc, char** argv);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_CLIENT_MAIN_H_
