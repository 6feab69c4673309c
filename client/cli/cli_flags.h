// The values and help texts of the flags that several `gemm-client`
// subcommands share (run, load): --check, --precision and --memory.
//
// Thread-safety: constants.
//
//   run->add_option("--check", options.check, kCheckHelp)
//       ->transform(CLI::CheckedTransformer(kCheckModes, CLI::ignore_case));
#ifndef GEMM_CLIENT_CLI_CLI_FLAGS_H_
#define GEMM_CLIENT_CLI_CLI_FLAGS_H_

#include <map>
#include <string>
#include <vector>

#include "proto/gemm.pb.h"

namespace gemm::client {

// --check's values, as GemmParams.check takes them.
inline const std::map<std::string, v1::Check> kCheckModes = {
    {"default", v1::CHECK_DEFAULT},
    {"abft", v1::CHECK_ABFT},
    {"off", v1::CHECK_OFF}};
// --precision's values, as GemmParams.precision takes them.
inline const std::map<std::string, v1::Precision> kPrecisions = {
    {"fp32", v1::PRECISION_FP32},
    {"fp32-tensor", v1::PRECISION_FP32_TENSOR},
    {"tf32", v1::PRECISION_TF32},
    {"bf16", v1::PRECISION_BF16}};
inline constexpr char kPrecisionHelp[] =
    "arithmetic the server may use: fp32 (strict float32, the default), "
    "fp32-tensor (float32-accurate, Tensor Cores allowed), tf32 or bf16 "
    "(inputs rounded, on Tensor Cores)";
// --memory's values.
inline const std::vector<std::string> kMemoryModes = {"socket", "shm",
                                                      "cuda-ipc"};
inline constexpr char kMemoryHelp[] =
    "where operands and results travel: socket (in the gRPC messages), shm "
    "(a POSIX shared-memory region registered with a server on this host) "
    "or cuda-ipc (GPU memory on device 0 shared by CUDA IPC with a CUDA "
    "server on this host; builds with CUDA)";
inline constexpr char kCheckHelp[] =
    "result check by the server: abft (row and column checksums; a result "
    "that fails is re-run, never returned), off, or default (the server's "
    "--check-min-gflop)";

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_CLI_FLAGS_H_
