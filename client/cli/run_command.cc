#include "client/cli/run_command.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "absl/strings/str_format.h"
#include "client/cli/npy.h"
#include "common/precision.h"
#include "common/reference_gemm.h"

namespace gemm::client {
namespace {

// An operand from .npy that must have the rows and columns the shape needs.
absl::Status LoadOperand(const std::string& path, const char* name,
                         uint64_t rows, uint64_t cols,
                         std::vector<float>* out) {
  auto matrix = ReadNpy(path);
  if (!matrix.ok()) return matrix.status();
  if (matrix->rows != rows || matrix->cols != cols) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--%s %s: is %dx%d, the shape needs %dx%d", name, path,
                        matrix->rows, matrix->cols, rows, cols));
  }
  *out = std::move(matrix->data);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RunOperands> PrepareOperands(const RunOptions& options) {
  RunOperands operands;
  GemmProblem& p = operands.problem;
  p = options.problem;
  // Shapes come from the files where given.
  if (!options.a_path.empty()) {
    auto matrix = ReadNpy(options.a_path);
    if (!matrix.ok()) return matrix.status();
    p.m = p.trans_a ? matrix->cols : matrix->rows;
    p.k = p.trans_a ? matrix->rows : matrix->cols;
    operands.a = std::move(matrix->data);
  }
  if (!options.b_path.empty()) {
    auto matrix = ReadNpy(options.b_path);
    if (!matrix.ok()) return matrix.status();
    const uint64_t kb = p.trans_b ? matrix->cols : matrix->rows;
    p.n = p.trans_b ? matrix->rows : matrix->cols;
    if (!options.a_path.empty() && kb != p.k) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--b %s: has K=%d, but --a gives K=%d", options.b_path, kb, p.k));
    }
    p.k = kb;
    operands.b = std::move(matrix->data);
  }
  if (options.a_path.empty() || options.b_path.empty()) {
    if (operands.a.empty()) {
      operands.a.resize(p.a_elements());
      FillRandom(operands.a.data(), operands.a.size(), options.seed);
    }
    if (operands.b.empty()) {
      operands.b.resize(p.b_elements());
      FillRandom(operands.b.data(), operands.b.size(), options.seed + 1);
    }
  }
  if (!options.c_path.empty()) {
    absl::Status s = LoadOperand(options.c_path, "c", p.m, p.n, &operands.c);
    if (!s.ok()) return s;
  } else if (p.beta != 0.0f) {
    operands.c.resize(p.c_elements());
    FillRandom(operands.c.data(), operands.c.size(), options.seed + 2);
  }
  return operands;
}

absl::StatusOr<int> RunGemms(GemmClient* client, const RunOptions& options,
                             const RunOperands& operands,
                             const std::string& server, std::FILE* out) {
  const GemmProblem& p = operands.problem;
  GemmArgs args;
  args.problem = p;
  args.kernel = options.kernel;
  args.timeout_ms = options.job_timeout_ms;
  args.check = options.check;
  args.precision = options.precision;
  args.a = operands.a.data();
  args.b = operands.b.data();
  args.c = operands.c.empty() ? nullptr : operands.c.data();

  std::vector<double> want;
  if (options.verify) {
    want = ReferenceGemm(p, args.a, args.b, args.c);
  }
  const double mb_moved =
      (4.0 * (operands.a.size() + operands.b.size() + operands.c.size()) +
       4.0 * p.m * p.n) /
      1e6;
  // Operands and result in a region: written once, before the runs.
  std::unique_ptr<JobRegion> region;
  uint64_t result_offset = 0;
  if (options.memory != OperandMemory::kMessages) {
    const uint64_t bytes = 4 * (operands.a.size() + operands.b.size() +
                                operands.c.size() + p.c_elements()) +
                           4 * 256;
    absl::StatusOr<std::unique_ptr<JobRegion>> made =
        JobRegion::Create(client, options.memory, bytes);
    if (!made.ok()) return made.status();
    region = std::move(*made);
    auto place = [&](const std::vector<float>& data,
                     RegionOffset* ref) -> absl::Status {
      if (data.empty()) return absl::OkStatus();
      absl::StatusOr<RegionOffset> placed =
          region->Place(data.data(), 4 * data.size());
      if (placed.ok()) *ref = *placed;
      return placed.status();
    };
    absl::Status placed = place(operands.a, &args.a_region);
    if (placed.ok()) placed = place(operands.b, &args.b_region);
    if (placed.ok()) placed = place(operands.c, &args.c_region);
    if (!placed.ok()) return placed;
    absl::StatusOr<uint64_t> at = region->Reserve(4 * p.c_elements());
    if (!at.ok()) return at.status();
    result_offset = *at;
    args.result_region = region->At(result_offset);
  }
  absl::FPrintF(out, "GEMM %s alpha=%g beta=%g kernel=%s via %s%s\n",
                p.ToString(), p.alpha, p.beta, options.kernel, server,
                region == nullptr
                    ? ""
                    : absl::StrCat(", operands and result in ",
                                   OperandMemoryName(options.memory),
                                   " region ", region->name()));
  std::vector<float> c(p.c_elements());
  int failures = 0;
  for (int i = 0; i < options.repeat; ++i) {
    // Poison the output, so that an unwritten element cannot pass.
    std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
    if (region != nullptr) {
      absl::Status poisoned =
          region->Write(result_offset, c.data(), 4 * c.size());
      if (!poisoned.ok()) return poisoned;
    }
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<v1::Timing> timing = client->Gemm(args, c.data());
    const double client_ms = std::chrono::duration<double, std::milli>(
                                 std::chrono::steady_clock::now() - start)
                                 .count();
    if (!timing.ok()) return timing.status();
    if (region != nullptr) {
      absl::Status read = region->Read(result_offset, c.data(), 4 * c.size());
      if (!read.ok()) return read;
    }
    absl::FPrintF(
        out,
        "run %d: client %.3f ms | server %.3f ms = queue %.3f + h2d %.3f + "
        "compute %.3f + d2h %.3f | batch %u | %s (%s) on %s | %.1f GFLOP/s "
        "compute, %.1f end to end | %.1f MB moved",
        i + 1, client_ms, timing->server_ms(), timing->queue_ms(),
        timing->h2d_ms(), timing->compute_ms(), timing->d2h_ms(),
        timing->batch_size(), timing->kernel(), timing->precision(),
        timing->device(), timing->gflops(), p.flops() / (client_ms * 1e6),
        mb_moved);
    if (timing->check().ran()) {
      const v1::CheckRecord& check = timing->check();
      absl::FPrintF(out,
                    " | check %.3f ms (%.1f%% of compute), worst line %.2g of "
                    "its tolerance",
                    check.ms(),
                    timing->compute_ms() > 0
                        ? 100.0 * check.ms() / timing->compute_ms()
                        : 0.0,
                    check.worst_ratio());
      if (check.mismatches() > 0) {
        absl::FPrintF(out, " | %d failed run(s) replaced: %s",
                      check.mismatches(), check.detail());
      }
    }
    if (options.verify) {
      // Within what the arithmetic that ran allows (1e-5 for float32).
      const double tolerance =
          VerifyTolerance(PrecisionNamed(timing->precision()));
      const double err = RelativeFrobeniusError(c.data(), want);
      const bool ok = err <= tolerance;
      if (!ok) ++failures;
      absl::FPrintF(out, " | rel. error %.2e vs float64 %s", err,
                    ok ? "OK" : absl::StrFormat("FAILED (> %.0e)", tolerance));
    }
    absl::FPrintF(out, "\n");
  }
  if (!options.out_path.empty()) {
    absl::Status s = WriteNpy(options.out_path, p.m, p.n, c.data());
    if (!s.ok()) return s;
    absl::FPrintF(out, "wrote C to %s\n", options.out_path);
  }
  return failures;
}

}  // namespace gemm::client
