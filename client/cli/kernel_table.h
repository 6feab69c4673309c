// What `gemm-client kernels` does: every kernel a server lists, on one
// shape, timed by the server (compute, server total) and by the client (end
// to end), medians after a warm-up, against a yardstick (cuBLAS where the
// server has it, else the fastest kernel); the chapter's table as markdown,
// and as JSON.
//
// Thread-safety: stateless functions.
//
//   ASSIGN_OR_RETURN(KernelTable table, MeasureKernels(client.get(), {}));
//   std::fputs(FormatKernelTableMarkdown(table, "host:50051").c_str(), stdout);
//   RETURN_IF_ERROR(WriteTextFile("k.json", FormatKernelTableJson(table)));
#ifndef GEMM_CLIENT_CLI_KERNEL_TABLE_H_
#define GEMM_CLIENT_CLI_KERNEL_TABLE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/lib/gemm_client.h"
#include "common/gemm_problem.h"

namespace gemm::client {

struct KernelTableOptions {
  // The shape (no transposes, alpha 1, beta 0). Default 4096^3.
  GemmProblem problem{.m = 4096, .n = 4096, .k = 4096};
  // Untimed runs per kernel. Default 1.
  int warmup = 1;
  // Timed runs per kernel; the median is shown. Default 3.
  int repeat = 3;
  // Check each kernel's C against a float64 reference.
  bool verify = false;
};

struct KernelTable {
  struct Row {
    std::string kernel;
    // The arithmetic it computes in ("fp32", "fp32-tensor", "tf32",
    // "bf16").
    std::string precision = "fp32";
    // Medians of the timed runs.
    double compute_ms = 0, server_ms = 0, client_ms = 0;
    // Relative error against float64 (with verify); -1 when not checked.
    double error = -1;
    // Why the kernel failed; empty when it ran.
    std::string failure;
  };

  KernelTableOptions options;
  std::string backend;  // Info's backend
  std::string base;     // "cublas" or "best"
  double base_ms = 0;   // the yardstick's compute time
  std::vector<Row> rows;
};

// Runs every kernel of the server's Info on options.problem. Fails only when
// Info does; a kernel's failure is in its row.
// The GemmParams.precision that lets a kernel of Info's `kernel_precision`
// ("fp32", "fp32-tensor", "tf32", "bf16") run: the server refuses a kernel
// whose arithmetic the job did not ask for (v9 and v12 need fp32-tensor).
v1::Precision PrecisionToRun(absl::string_view kernel_precision);

absl::StatusOr<KernelTable> MeasureKernels(GemmClient* client,
                                           const KernelTableOptions& options);

// A title line and the markdown table; `server` is the address as given.
std::string FormatKernelTableMarkdown(const KernelTable& table,
                                      const std::string& server);

// {"m", "n", "k", "base", "kernels": [{"kernel", "compute_ms", "tflops",
// "percent_of_base", "server_ms", "client_ms"}, ...]}; failed kernels left
// out.
std::string FormatKernelTableJson(const KernelTable& table);

// Whether every kernel ran (and, with verify, was within 1e-5 of float64).
bool AllKernelsPassed(const KernelTable& table);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_KERNEL_TABLE_H_
