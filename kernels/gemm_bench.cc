// gemm-bench: the chapter's "Record what you get" table. For each shape it
// checks every selected kernel against a float64 GPU reference, then times it
// (CUDA events around each launch, median after warm-up) and reports time,
// TFLOP/s and % of cuBLAS; --json writes everything for bench/gemmbench.py.
//
//   gemm-bench --shapes 1024,2048,4096,8192,1000x999x777 --kernels all --json
//   out.json
//
// A shape is N (square) or MxNxK, with :NT, :TN or :TT for transposed
// operands. Operands are random in [-1,-0.1]U[0.1,1], row-major, tightly
// packed. v0 is skipped above
// --v0-max-dim (it takes seconds per run at 8192); every kernel's timed
// repeats are capped so that one kernel spends at most --max-seconds.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/cublas_sgemm.h"
#include "kernels/launch_timer.h"
#include "kernels/sgemm.h"
#include "kernels/sgemm_launchers.h"
#include "kernels/v10_tile_sweep.h"

namespace gemm::kernels {
namespace {

struct BenchOptions {
  std::vector<std::string> shapes = {"1024", "2048", "4096", "8192",
                                     "1000x999x777"};
  std::string kernels = "all";  // comma-separated registry names, or "all"
  int repeats = 20;  // timed launches per kernel and shape (before the cap)
  int warmup = 3;    // untimed launches first
  double max_seconds = 3.0;    // cap on one kernel's timed launches per shape
  uint32_t v0_max_dim = 4096;  // v0 runs only where m, n and k are all <= this
  float alpha = 1.f, beta = 0.f;
  bool check = true;  // compare with the float64 reference before timing
  std::string json;   // output path; empty: no JSON
  int device = 0;
  bool tile_sweep = false;  // add MakeV10TileSweepKernels() to the kernels
};

// N or MxNxK, optionally with :XY for the transposes of A and B (N or T
// each; "4096:TN" is op(A) = A^T).
absl::StatusOr<GemmProblem> ParseShape(const std::string& text) {
  std::string dims = text;
  bool trans_a = false, trans_b = false;
  if (const size_t colon = text.find(':'); colon != std::string::npos) {
    const std::string t = text.substr(colon + 1);
    if (t.size() != 2 || (t[0] != 'N' && t[0] != 'T') ||
        (t[1] != 'N' && t[1] != 'T')) {
      return absl::InvalidArgumentError(
          "transposes must be NN, NT, TN or TT: " + text);
    }
    trans_a = t[0] == 'T';
    trans_b = t[1] == 'T';
    dims = text.substr(0, colon);
  }
  std::vector<std::string> parts = absl::StrSplit(dims, 'x');
  uint32_t v[3];
  if (parts.size() == 1) parts = {parts[0], parts[0], parts[0]};
  if (parts.size() != 3)
    return absl::InvalidArgumentError("shape must be N or MxNxK: " + text);
  for (int i = 0; i < 3; ++i) {
    if (!absl::SimpleAtoi(parts[i], &v[i]) || v[i] < 1) {
      return absl::InvalidArgumentError("bad shape: " + text);
    }
  }
  return GemmProblem{v[0], v[1], v[2], trans_a, trans_b};
}

// Allowed relative Frobenius error: float32 accumulation error grows about
// like sqrt(K); 1e-5 holds up to K ~ 1000 (the unit tests' bound). Kernels
// that round their inputs to TF32 or BF16 get what that rounding allows.
double Tolerance(int k, Precision precision) {
  const double growth = std::max(1.0, std::sqrt(k / 1024.0));
  switch (precision) {
    case Precision::kTf32:
      return 5e-3 * growth;
    case Precision::kBf16:
      return 3e-2 * growth;
    default:
      return 1e-5 * growth;
  }
}

struct Result {
  GemmProblem shape;
  std::string kernel;
  std::string description;
  std::string precision;  // "fp32", "tf32", "bf16"
  std::string status;     // "ok", "skipped", "incorrect", "error"
  std::string detail;
  double rel_error = NAN;
  double median_ms = NAN, min_ms = NAN, mean_ms = NAN;
  int repeats = 0;
  double tflops = NAN;
  double pct_of_cublas = NAN;
};

#define BENCH_CHECK_CUDA(expr)                                         \
  do {                                                                 \
    const cudaError_t bench_err = (expr);                              \
    if (bench_err != cudaSuccess) return CudaStatus(bench_err, #expr); \
  } while (0)

template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(ptr_); }
  cudaError_t Allocate(size_t count) {
    return cudaMalloc(reinterpret_cast<void**>(&ptr_), count * sizeof(T));
  }
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
};

// Checks and times every kernel on one shape; appends one Result per kernel.
absl::Status BenchShape(const BenchOptions& options, GemmProblem shape,
                        const std::vector<const SgemmKernel*>& kernels,
                        cudaStream_t stream, std::vector<Result>* results) {
  const size_t a_size = static_cast<size_t>(shape.m) * shape.k;
  const size_t b_size = static_cast<size_t>(shape.k) * shape.n;
  const size_t c_size = static_cast<size_t>(shape.m) * shape.n;
  DeviceArray<float> a, b, c, c_initial;
  DeviceArray<double> ref, sums;
  BENCH_CHECK_CUDA(a.Allocate(a_size));
  BENCH_CHECK_CUDA(b.Allocate(b_size));
  BENCH_CHECK_CUDA(c.Allocate(c_size));
  BENCH_CHECK_CUDA(c_initial.Allocate(c_size));
  BENCH_CHECK_CUDA(sums.Allocate(2));
  BENCH_CHECK_CUDA(LaunchFillRandom(a.get(), a_size, 1, stream));
  BENCH_CHECK_CUDA(LaunchFillRandom(b.get(), b_size, 2, stream));
  BENCH_CHECK_CUDA(LaunchFillRandom(c_initial.get(), c_size, 3, stream));

  shape.alpha = options.alpha;
  shape.beta = options.beta;
  const SgemmArgs args = MakeSgemmArgs(shape, a.get(), b.get(), c.get());
  if (options.check) {
    BENCH_CHECK_CUDA(ref.Allocate(c_size));
    SgemmArgs ref_args = args;
    ref_args.c = c_initial.get();
    BENCH_CHECK_CUDA(LaunchReferenceGemmF64(ref_args, ref.get(), stream));
  }

  const double flops = 2.0 * shape.m * shape.n * shape.k;
  for (const SgemmKernel* kernel : kernels) {
    Result r;
    r.shape = shape;
    r.kernel = std::string(kernel->name());
    r.description = std::string(kernel->description());
    r.precision = std::string(PrecisionName(kernel->precision()));
    if (r.kernel == "v0" &&
        std::max({shape.m, shape.n, shape.k}) > options.v0_max_dim) {
      r.status = "skipped";
      r.detail = absl::StrCat("v0 above --v0-max-dim=", options.v0_max_dim);
      results->push_back(r);
      continue;
    }
    if (options.check) {
      // C starts from the same data as the reference saw; poisoned with NaN
      // when beta == 0.
      BENCH_CHECK_CUDA(cudaMemcpyAsync(c.get(), c_initial.get(),
                                       c_size * sizeof(float),
                                       cudaMemcpyDeviceToDevice, stream));
      if (options.beta == 0.f) {
        BENCH_CHECK_CUDA(cudaMemsetAsync(c.get(), 0xff, c_size * sizeof(float),
                                         stream));  // NaN
      }
    }
    if (absl::Status status = kernel->Launch(args, stream); !status.ok()) {
      r.status = "error";
      r.detail = status.ToString();
      results->push_back(r);
      continue;
    }
    if (options.check) {
      BENCH_CHECK_CUDA(
          cudaMemsetAsync(sums.get(), 0, 2 * sizeof(double), stream));
      BENCH_CHECK_CUDA(LaunchErrorSums(args, ref.get(), sums.get(), stream));
      double host_sums[2];
      BENCH_CHECK_CUDA(cudaMemcpyAsync(host_sums, sums.get(), sizeof(host_sums),
                                       cudaMemcpyDeviceToHost, stream));
      BENCH_CHECK_CUDA(cudaStreamSynchronize(stream));
      r.rel_error = std::sqrt(host_sums[0] / host_sums[1]);
      if (!(r.rel_error <= Tolerance(shape.k, kernel->precision()))) {
        r.status = "incorrect";
        r.detail = absl::StrFormat("relative error %.3g > %.3g", r.rel_error,
                                   Tolerance(shape.k, kernel->precision()));
      }
    }
    // Warm-up, then timed launches; the first one sizes the repeats.
    LaunchTimingOptions timing;
    timing.warmup = options.warmup;
    timing.repeats = options.repeats;
    timing.max_seconds = options.max_seconds;
    absl::StatusOr<LaunchTimes> times =
        TimeLaunches(*kernel, args, stream, timing);
    if (!times.ok()) return times.status();
    r.repeats = static_cast<int>(times->ms.size());
    r.median_ms = times->MedianMs();
    r.min_ms = times->MinMs();
    r.mean_ms = times->MeanMs();
    r.tflops = flops / (r.median_ms * 1e-3) / 1e12;
    if (r.status.empty()) r.status = "ok";
    results->push_back(r);
  }

  // % of cuBLAS, where cuBLAS ran on this shape.
  const auto cublas =
      std::find_if(results->begin(), results->end(), [&](const Result& r) {
        return r.kernel == "cublas" && r.shape.m == shape.m &&
               r.shape.n == shape.n && r.shape.k == shape.k && r.status == "ok";
      });
  if (cublas != results->end()) {
    for (Result& r : *results) {
      if (r.shape.m == shape.m && r.shape.n == shape.n &&
          r.shape.k == shape.k) {
        r.pct_of_cublas = 100.0 * cublas->median_ms / r.median_ms;
      }
    }
  }
  return absl::OkStatus();
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) {
      out += absl::StrFormat("\\u%04x", ch);
      continue;
    }
    out += ch;
  }
  return out + "\"";
}

std::string JsonNumber(double v) {
  return std::isfinite(v) ? absl::StrFormat("%.6g", v) : "null";
}

std::string ShapeName(const GemmProblem& s) {
  std::string name = absl::StrCat(s.m, "x", s.n, "x", s.k);
  if (s.trans_a || s.trans_b) {
    absl::StrAppend(&name, ":", s.trans_a ? "T" : "N", s.trans_b ? "T" : "N");
  }
  return name;
}

int Run(int argc, char** argv) {
  BenchOptions options;
  CLI::App app{
      "gemm-bench: the chapter's SGEMM table (time, TFLOP/s, % of cuBLAS)"};
  app.add_option("--shapes", options.shapes, "N or MxNxK, comma-separated")
      ->delimiter(',');
  app.add_option("--kernels", options.kernels,
                 "comma-separated kernel names, or 'all'");
  app.add_option("--repeats", options.repeats,
                 "timed launches per kernel and shape")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", options.warmup, "untimed launches first")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-seconds", options.max_seconds,
                 "cap on one kernel's timed launches per shape");
  app.add_option("--v0-max-dim", options.v0_max_dim,
                 "skip v0 where m, n or k exceeds this");
  app.add_option("--alpha", options.alpha, "alpha");
  app.add_option("--beta", options.beta, "beta");
  app.add_flag("!--no-check", options.check,
               "skip the float64 reference check");
  app.add_option("--json", options.json, "write results as JSON to this path");
  app.add_option("--device", options.device, "CUDA device");
  app.add_flag("--tile-sweep", options.tile_sweep,
               "also v10's tile configurations (v10t-*)");
  CLI11_PARSE(app, argc, argv);

  std::vector<GemmProblem> shapes;
  for (const std::string& text : options.shapes) {
    absl::StatusOr<GemmProblem> shape = ParseShape(text);
    if (!shape.ok()) {
      std::cerr << shape.status() << "\n";
      return 2;
    }
    shapes.push_back(*shape);
  }
  const KernelRegistry& registry = KernelRegistry::Global();
  std::vector<std::string> names = registry.Names();
  if (options.kernels != "all") names = absl::StrSplit(options.kernels, ',');
  std::vector<const SgemmKernel*> kernels;
  for (const std::string& name : names) {
    const SgemmKernel* kernel = registry.Find(name);
    if (kernel == nullptr) {
      std::cerr << "unknown kernel '" << name
                << "'; known: " << absl::StrJoin(registry.Names(), ",") << "\n";
      return 2;
    }
    kernels.push_back(kernel);
  }
  const std::vector<std::unique_ptr<SgemmKernel>> sweep =
      options.tile_sweep ? MakeV10TileSweepKernels()
                         : std::vector<std::unique_ptr<SgemmKernel>>();
  for (const auto& kernel : sweep) kernels.push_back(kernel.get());

  cudaDeviceProp prop;
  int driver = 0, runtime = 0;
  if (absl::Status s =
          CudaStatus(cudaSetDevice(options.device), "cudaSetDevice");
      !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  cudaGetDeviceProperties(&prop, options.device);
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  const absl::StatusOr<std::string> cublas_version = CublasVersion();
  cudaStream_t stream;
  if (absl::Status s =
          CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                     "cudaStreamCreate");
      !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  std::printf(
      "device: %s (sm_%d%d, %d SMs), CUDA driver %d, runtime %d, cuBLAS %s\n",
      prop.name, prop.major, prop.minor, prop.multiProcessorCount, driver,
      runtime,
      cublas_version.ok() ? cublas_version->c_str()
                          : cublas_version.status().ToString().c_str());

  std::vector<Result> results;
  for (const GemmProblem& shape : shapes) {
    const size_t first = results.size();
    if (absl::Status s = BenchShape(options, shape, kernels, stream, &results);
        !s.ok()) {
      std::cerr << "shape " << ShapeName(shape) << ": " << s << "\n";
      return 1;
    }
    std::printf("\nM x N x K = %s\n%-8s %10s %9s %10s %10s %8s  %s\n",
                ShapeName(shape).c_str(), "kernel", "time(ms)", "TFLOP/s",
                "% cuBLAS", "rel.err", "repeats", "status");
    for (size_t i = first; i < results.size(); ++i) {
      const Result& r = results[i];
      std::printf("%-8s %10.3f %9.2f %10.1f %10.2e %8d  %s %s\n",
                  r.kernel.c_str(), r.median_ms, r.tflops, r.pct_of_cublas,
                  r.rel_error, r.repeats, r.status.c_str(), r.detail.c_str());
    }
    std::fflush(stdout);
  }

  bool all_ok = true;
  for (const Result& r : results)
    all_ok &= r.status == "ok" || r.status == "skipped";
  if (!options.json.empty()) {
    std::string command;
    for (int i = 0; i < argc; ++i)
      absl::StrAppend(&command, i ? " " : "", argv[i]);
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    std::string json = absl::StrCat(
        "{\n  \"tool\": \"gemm-bench\",\n  \"date\": ", JsonString(date),
        ",\n  \"command\": ", JsonString(command),
        ",\n  \"device\": {\"name\": ", JsonString(prop.name),
        ", \"compute_capability\": ",
        JsonString(absl::StrCat(prop.major, ".", prop.minor)),
        ", \"sm_count\": ", prop.multiProcessorCount,
        ", \"cuda_driver_api\": ", driver, ", \"cuda_runtime\": ", runtime,
        ", \"cublas\": ",
        JsonString(cublas_version.ok() ? *cublas_version : "unavailable"),
        "},\n  \"settings\": {\"alpha\": ", JsonNumber(options.alpha),
        ", \"beta\": ", JsonNumber(options.beta),
        ", \"repeats\": ", options.repeats, ", \"warmup\": ", options.warmup,
        ", \"max_seconds\": ", JsonNumber(options.max_seconds),
        ", \"v0_max_dim\": ", options.v0_max_dim,
        ", \"check\": ", options.check ? "true" : "false",
        ", \"reference\": \"float64 GPU reference kernel, relative Frobenius "
        "error <= 1e-5*max(1,sqrt(K/1024)); 5e-3 and 3e-2 times that "
        "factor for TF32 and BF16 kernels\""
        ", \"timing\": \"CUDA events around each launch, median of repeats "
        "after warm-up\"},\n"
        "  \"results\": [\n");
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      absl::StrAppend(&json, "    {\"m\": ", r.shape.m, ", \"n\": ", r.shape.n,
                      ", \"trans_a\": ", r.shape.trans_a ? "true" : "false",
                      ", \"trans_b\": ", r.shape.trans_b ? "true" : "false",
                      ", \"k\": ", r.shape.k,
                      ", \"trans_a\": ", r.shape.trans_a ? "true" : "false",
                      ", \"trans_b\": ", r.shape.trans_b ? "true" : "false",
                      ", \"kernel\": ", JsonString(r.kernel),
                      ", \"description\": ", JsonString(r.description),
                      ", \"precision\": ", JsonString(r.precision),
                      ", \"status\": ", JsonString(r.status),
                      ", \"detail\": ", JsonString(r.detail),
                      ", \"median_ms\": ", JsonNumber(r.median_ms),
                      ", \"min_ms\": ", JsonNumber(r.min_ms),
                      ", \"mean_ms\": ", JsonNumber(r.mean_ms),
                      ", \"repeats\": ", r.repeats,
                      ", \"tflops\": ", JsonNumber(r.tflops),
                      ", \"pct_of_cublas\": ", JsonNumber(r.pct_of_cublas),
                      ", \"rel_error\": ", JsonNumber(r.rel_error), "}",
                      i + 1 < results.size() ? "," : "", "\n");
    }
    absl::StrAppend(&json, "  ]\n}\n");
    std::ofstream out(options.json);
    out << json;
    if (!out) {
      std::cerr << "cannot write " << options.json << "\n";
      return 1;
    }
  }
  cudaStreamDestroy(stream);
  return all_ok ? 0 : 3;
}

}  // namespace
}  // namespace gemm::kernels

int main(int argc, char** argv) { return gemm::kernels::Run(argc, argv); }
