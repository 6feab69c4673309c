// dispatch-bench: how close "auto" comes to the best of its candidates (the
// kernels that --precision allows among the shape tuner's: every kernel
// from v6 on, split-K included, and cuBLAS; server/cuda/shape_tuner.h).
//
// Builds a CudaExecutor (which calibrates its dispatch table, or loads it
// from --dispatch-cache), then times every candidate on a sweep of shapes
// that are mostly off the calibration grid (CUDA events, median of --reps after
// a warm-up, kernels/launch_timer.h; random operands) and reports, per shape,
// auto's choice at the shape's first job (the table's) and once the tuner
// measured the shape, the best kernel and auto's slowdown against it.
// Writes JSON.
//
//   dispatch-bench --out dispatch.json   (gemmbench.py run --scenario dispatch
//   runs it)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/precision.h"
#include "kernels/exit_on_cuda_error.h"
#include "kernels/launch_timer.h"
#include "kernels/sgemm.h"
#include "server/cuda/cuda_executor.h"

namespace {

using gemm::kernels::KernelRegistry;
using gemm::kernels::LaunchTimes;
using gemm::kernels::MakeSgemmArgs;
using gemm::kernels::SgemmArgs;
using gemm::kernels::TimeLaunches;

// Median of `reps` timed launches after one warm-up, in milliseconds; -1
// when the kernel does not run the shape (CanImplement), fatal otherwise.
double TimeMs(const std::string& name, int m, int n, int k, const float* a,
              const float* b, float* c, cudaStream_t stream, int reps) {
  const auto* kernel = KernelRegistry::Global().Find(name);
  const SgemmArgs args = MakeSgemmArgs(
      gemm::GemmProblem{static_cast<uint32_t>(m), static_cast<uint32_t>(n),
                        static_cast<uint32_t>(k)},
      a, b, c);
  const absl::StatusOr<LaunchTimes> times =
      TimeLaunches(*kernel, args, stream, {.warmup = 1, .repeats = reps});
  if (!times.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(),
                 times.status().ToString().c_str());
    if (kernel->CanImplement(args).ok()) std::exit(1);
    return -1;
  }
  return times->MedianMs();
}

}  // namespace

int main(int argc, char** argv) {
  std::string out, cache, precision_name = "fp32";
  int reps = 7;
  CLI::App app{"dispatch-bench: auto vs the best of its candidate kernels"};
  app.add_option("--out", out, "JSON file");
  app.add_option("--dispatch-cache", cache, "as gemm-server's flag");
  app.add_option("--reps", reps)->capture_default_str();
  app.add_option("--precision", precision_name,
                 "auto's precision: fp32 or fp32-tensor (the candidates it "
                 "allows)")
      ->check(CLI::IsMember({"fp32", "fp32-tensor"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  gemm::server::CudaExecutor::Options options;
  options.devices = {0};
  options.dispatch_cache = cache;
  const auto t0 = std::chrono::steady_clock::now();
  auto executor = gemm::server::CudaExecutor::Create(options);
  if (!executor.ok()) {
    std::fprintf(stderr, "%s\n", executor.status().ToString().c_str());
    return 1;
  }
  const double create_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  const auto& policy = (*executor)->dispatch_policy();

  std::vector<std::array<int, 3>> shapes;
  for (int s : {48, 100, 128, 200, 300, 512, 700, 1000, 1500, 2048, 3000, 4096,
                5000, 6144}) {
    shapes.push_back({s, s, s});
  }
  for (auto s : std::vector<std::array<int, 3>>{{1000, 999, 777},
                                                {4095, 4097, 4093},
                                                {16, 4096, 4096},
                                                {4096, 16, 4096},
                                                {4096, 4096, 16},
                                                {64, 64, 8192},
                                                {8192, 8192, 64},
                                                {256, 4096, 1024},
                                                {3000, 200, 3000},
                                                {1, 4096, 4096},
                                                {333, 555, 777},
                                                {2500, 2500, 100}}) {
    shapes.push_back(s);
  }
  size_t largest = 0;
  for (auto& s : shapes) {
    largest = std::max({largest, size_t(s[0]) * s[2], size_t(s[2]) * s[1],
                        size_t(s[0]) * s[1]});
  }
  std::vector<float> host(largest);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& x : host) x = dist(rng);
  float *a, *b, *c;
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&a), 4 * largest));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&b), 4 * largest));
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&c), 4 * largest));
  CHECK_CUDA(cudaMemcpy(a, host.data(), 4 * largest, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(b, host.data(), 4 * largest, cudaMemcpyHostToDevice));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // The candidates that this precision allows: the tuner's, or without one
  // the table's.
  const gemm::Precision precision = gemm::PrecisionNamed(precision_name);
  gemm::server::ShapeTuner* tuner = (*executor)->shape_tuner();
  std::vector<std::string> candidates;
  for (const std::string& name :
       tuner != nullptr ? tuner->kernels() : policy.kernels()) {
    const auto* kernel = KernelRegistry::Global().Find(name);
    if (kernel != nullptr &&
        gemm::KernelMayServe(kernel->precision(), precision)) {
      candidates.push_back(name);
    }
  }
  std::vector<std::string> rows;
  double worst = 0, worst_first = 0, sum_auto = 0, sum_best = 0;
  int own_chosen = 0;
  std::printf("%-18s", "shape");
  for (const std::string& name : candidates) {
    std::printf(" %10s", (name + " ms").c_str());
  }
  std::printf(" %9s %9s %9s %9s %9s\n", "first", "auto", "best", "first/best",
              "auto/best");
  for (auto& s : shapes) {
    const gemm::GemmProblem shape{static_cast<uint32_t>(s[0]),
                                  static_cast<uint32_t>(s[1]),
                                  static_cast<uint32_t>(s[2])};
    std::vector<double> ms;
    for (const std::string& name : candidates) {
      ms.push_back(TimeMs(name, s[0], s[1], s[2], a, b, c, stream, reps));
    }
    // The first job of the shape gets the table's choice and queues the
    // shape; once the tuner measured it, the next job gets the tuned one.
    const absl::StatusOr<gemm::server::KernelHandle> first =
        (*executor)->ResolveKernel(shape, "auto", precision);
    if (tuner != nullptr) tuner->WaitIdle();
    const absl::StatusOr<gemm::server::KernelHandle> resolved =
        (*executor)->ResolveKernel(shape, "auto", precision);
    if (!first.ok() || !resolved.ok()) {
      std::fprintf(stderr, "auto: %s\n",
                   (first.ok() ? resolved : first).status().ToString().c_str());
      return 1;
    }
    const std::string chosen(resolved->name());
    const std::string first_name(first->name());
    const size_t best_index =
        std::min_element(ms.begin(), ms.end(),
                         [](double x, double y) {
                           // Failed (negative) times never win.
                           return x >= 0 && (y < 0 || x < y);
                         }) -
        ms.begin();
    const auto index_of = [&](const std::string& name) {
      return static_cast<size_t>(
          std::find(candidates.begin(), candidates.end(), name) -
          candidates.begin());
    };
    const size_t chosen_index = index_of(chosen);
    const size_t first_index = index_of(first_name);
    if (chosen_index == ms.size() || first_index == ms.size() ||
        ms[chosen_index] < 0 || ms[first_index] < 0) {
      std::fprintf(stderr, "auto chose %s then %s, not a candidate that runs\n",
                   first_name.c_str(), chosen.c_str());
      return 1;
    }
    if (chosen.rfind("cublas", 0) != 0) ++own_chosen;
    const double auto_ms = ms[chosen_index];
    const double best = ms[best_index];
    const double ratio = auto_ms / best;
    const double first_ratio = ms[first_index] / best;
    worst = std::max(worst, ratio);
    worst_first = std::max(worst_first, first_ratio);
    sum_auto += auto_ms;
    sum_best += best;
    std::printf("%5dx%5dx%5d", s[0], s[1], s[2]);
    std::vector<std::string> times;
    for (size_t i = 0; i < ms.size(); ++i) {
      std::printf(" %10.4f", ms[i]);
      times.push_back(
          absl::StrFormat("\"%s\": %.5f", candidates[i].c_str(), ms[i]));
    }
    std::printf(" %9s %9s %9s %9.3f %9.3f\n", first_name.c_str(),
                chosen.c_str(), candidates[best_index].c_str(), first_ratio,
                ratio);
    rows.push_back(absl::StrFormat(
        "{\"m\": %d, \"n\": %d, \"k\": %d, \"times_ms\": {%s}, "
        "\"auto_first\": \"%s\", \"auto\": \"%s\", \"best\": \"%s\", "
        "\"first_over_best\": %.4f, \"auto_over_best\": %.4f}",
        s[0], s[1], s[2], absl::StrJoin(times, ", "), first_name, chosen,
        candidates[best_index], first_ratio, ratio));
  }
  const auto devices = (*executor)->devices();
  std::printf(
      "worst auto/best %.3f (at first use %.3f); sum over the sweep %.3f; own "
      "kernels chosen for %d of %zu shapes; table %s (%zu shapes), executor "
      "start %.2f s\n",
      worst, worst_first, sum_auto / sum_best, own_chosen, shapes.size(),
      policy.origin().c_str(), policy.entries().size(), create_s);
  const std::string json = absl::StrFormat(
      "{\"device\": \"%s\", \"precision\": \"%s\", \"table\": \"%s\", "
      "\"table_shapes\": %d, "
      "\"candidates\": [\"%s\"], \"own_kernel_chosen\": %d, "
      "\"executor_start_s\": %.3f, \"reps\": %d, \"tuned\": %s, "
      "\"worst_auto_over_best\": %.4f, \"worst_first_over_best\": %.4f, "
      "\"sweep_auto_over_best\": %.4f, \"shapes\": [%s]}",
      devices.front().name, precision_name, policy.origin(),
      policy.entries().size(), absl::StrJoin(candidates, "\", \""), own_chosen,
      create_s, reps, tuner != nullptr ? "true" : "false", worst, worst_first,
      sum_auto / sum_best, absl::StrJoin(rows, ",\n  "));
  if (!out.empty()) std::ofstream(out) << json << "\n";
  return 0;
}
