#include "client/cli/kernel_table.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/precision.h"
#include "common/reference_gemm.h"
#include "nlohmann/json.hpp"

namespace gemm::client {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// TFLOP/s at `ms` milliseconds; 0 for no time.
double Tflops(const GemmProblem& problem, double ms) {
  return ms > 0 ? problem.flops() / ms / 1e9 : 0;
}

double PercentOfBase(const KernelTable& table, const KernelTable::Row& row) {
  return row.compute_ms > 0 && table.base_ms > 0
             ? 100.0 * (table.base_ms / row.compute_ms)
             : 0;
}

KernelTable::Row MeasureKernel(GemmClient* client,
                               const KernelTableOptions& options,
                               const std::string& kernel, const GemmArgs& args,
                               const std::vector<double>& want) {
  KernelTable::Row row;
  row.kernel = kernel;
  // Poisoned, so that a kernel that writes nothing cannot pass.
  std::vector<float> out(options.problem.c_elements(),
                         std::numeric_limits<float>::quiet_NaN());
  std::vector<double> compute, server, end_to_end;
  for (int i = 0; i < options.warmup + options.repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<v1::Timing> timing = client->Gemm(args, out.data());
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    if (!timing.ok()) {
      row.failure = timing.status().ToString();
      break;
    }
    if (i < options.warmup) continue;
    compute.push_back(timing->compute_ms());
    server.push_back(timing->server_ms());
    end_to_end.push_back(ms);
  }
  row.compute_ms = Median(compute);
  row.server_ms = Median(server);
  row.client_ms = Median(end_to_end);
  if (options.verify && row.failure.empty()) {
    row.error = RelativeFrobeniusError(out.data(), want);
  }
  return row;
}

}  // namespace

v1::Precision PrecisionToRun(absl::string_view kernel_precision) {
  if (kernel_precision == "fp32-tensor") return v1::PRECISION_FP32_TENSOR;
  if (kernel_precision == "tf32") return v1::PRECISION_TF32;
  if (kernel_precision == "bf16") return v1::PRECISION_BF16;
  return v1::PRECISION_FP32;
}

absl::StatusOr<KernelTable> MeasureKernels(GemmClient* client,
                                           const KernelTableOptions& options) {
  absl::StatusOr<v1::InfoResponse> info = client->Info();
  if (!info.ok()) return info.status();
  KernelTable table;
  table.options = options;
  table.options.problem = {
      .m = options.problem.m, .n = options.problem.n, .k = options.problem.k};
  table.backend = info->backend();
  const GemmProblem& problem = table.options.problem;
  std::vector<float> a(problem.a_elements()), b(problem.b_elements());
  FillRandom(a.data(), a.size(), 1);
  FillRandom(b.data(), b.size(), 2);
  std::vector<double> want;
  if (options.verify)
    want = ReferenceGemm(problem, a.data(), b.data(), nullptr);
  GemmArgs args{.problem = problem, .a = a.data(), .b = b.data()};
  // Each kernel in its own arithmetic (Info's kernel_details; a server
  // before them has float32 kernels only).
  std::vector<std::pair<std::string, std::string>> kernels;
  for (const auto& k : info->kernel_details()) {
    kernels.emplace_back(k.name(), k.precision());
  }
  if (kernels.empty()) {
    for (const std::string& k : info->kernels())
      kernels.emplace_back(k, "fp32");
  }
  for (const auto& [kernel, precision] : kernels) {
    args.kernel = kernel;
    args.precision = PrecisionToRun(precision);
    table.rows.push_back(
        MeasureKernel(client, table.options, kernel, args, want));
    table.rows.back().precision = precision;
  }
  // The yardstick: cuBLAS when the server has it, else the best kernel.
  table.base = "cublas";
  for (const KernelTable::Row& row : table.rows) {
    if (row.kernel == "cublas" && row.failure.empty()) {
      table.base_ms = row.compute_ms;
    }
  }
  if (table.base_ms == 0) {
    table.base = "best";
    for (const KernelTable::Row& row : table.rows) {
      if (row.failure.empty() && row.compute_ms > 0 &&
          (table.base_ms == 0 || row.compute_ms < table.base_ms)) {
        table.base_ms = row.compute_ms;
      }
    }
  }
  return table;
}

std::string FormatKernelTableMarkdown(const KernelTable& table,
                                      const std::string& server) {
  const KernelTableOptions& o = table.options;
  std::string out = absl::StrFormat(
      "GEMM %ux%ux%u on %s (%s), median of %d after %d warm-up\n", o.problem.m,
      o.problem.n, o.problem.k, server, table.backend, o.repeat, o.warmup);
  absl::StrAppendFormat(&out,
                        "| kernel | compute ms | TFLOP/s | %% of %s | server "
                        "ms | client ms | client TFLOP/s |%s\n",
                        table.base, o.verify ? " rel. error |" : "");
  absl::StrAppendFormat(&out, "|---|---:|---:|---:|---:|---:|---:|%s\n",
                        o.verify ? "---:|" : "");
  for (const KernelTable::Row& row : table.rows) {
    if (!row.failure.empty()) {
      absl::StrAppendFormat(&out, "| %s | failed: %s |\n", row.kernel,
                            row.failure);
      continue;
    }
    absl::StrAppendFormat(
        &out, "| %s | %.3f | %.3f | %.1f | %.3f | %.3f | %.3f |",
        row.precision == "fp32"
            ? row.kernel
            : absl::StrCat(row.kernel, " (", row.precision, ")"),
        row.compute_ms, Tflops(o.problem, row.compute_ms),
        PercentOfBase(table, row), row.server_ms, row.client_ms,
        o.problem.flops() / row.client_ms / 1e9);
    if (o.verify) absl::StrAppendFormat(&out, " %.2e |", row.error);
    out += "\n";
  }
  return out;
}

std::string FormatKernelTableJson(const KernelTable& table) {
  // Keys stay in the order written.
  using Json = nlohmann::ordered_json;
  const GemmProblem& problem = table.options.problem;
  Json kernels = Json::array();
  for (const KernelTable::Row& row : table.rows) {
    if (!row.failure.empty()) continue;
    kernels.push_back(Json{{"kernel", row.kernel},
                           {"precision", row.precision},
                           {"compute_ms", row.compute_ms},
                           {"tflops", Tflops(problem, row.compute_ms)},
                           {"percent_of_base", PercentOfBase(table, row)},
                           {"server_ms", row.server_ms},
                           {"client_ms", row.client_ms}});
  }
  Json out{{"m", problem.m},
           {"n", problem.n},
           {"k", problem.k},
           {"base", table.base},
           {"kernels", std::move(kernels)}};
  return out.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

bool AllKernelsPassed(const KernelTable& table) {
  for (const KernelTable::Row& row : table.rows) {
    // float32 kernels to 1e-5; inputs rounded to TF32 or BF16, to what that
    // rounding allows.
    const double tolerance = VerifyTolerance(PrecisionNamed(row.precision));
    if (!row.failure.empty() ||
        (table.options.verify && !(row.error <= tolerance))) {
      return false;
    }
  }
  return true;
}

}  // namespace gemm::client
