// check-bench --detect, and main (check_bench.h says what it does).
#include "kernels/check_bench.h"

#include <cuda_runtime_api.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/abft.h"

namespace gemm::kernels::check_bench {

int Detect(const DetectOptions& o, std::string* json) {
  const SgemmKernel* kernel = KernelRegistry::Global().Find(o.kernel);
  if (kernel == nullptr) {
    std::fprintf(stderr, "check-bench: no kernel '%s'\n", o.kernel.c_str());
    return 2;
  }
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const int bits[] = {31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 20, 16, 8, 0};
  // [size][bit] -> caught with both stages, by the line bound alone, tried.
  std::map<uint32_t, std::map<int, std::array<int, 3>>> table;
  int false_positives = 0;
  // [size] -> judge ms: random data with and without verification,
  // constant data with and without, and the lines verified there.
  std::map<uint32_t, std::array<double, 5>> cost;
  for (const uint32_t n : o.sizes) {
    Launch job;
    job.kernel = kernel;
    GemmProblem& p = job.batch.problem;
    p = GemmProblem{.m = n, .n = n, .k = n, .alpha = 1.0f, .beta = 0.0f};
    std::vector<float> a(p.a_elements()), b(p.b_elements());
    for (float& x : a) x = unit(rng);
    for (float& x : b) x = unit(rng);
    float* da = DeviceAlloc<float>(a.size());
    float* db = DeviceAlloc<float>(b.size());
    float* dc = DeviceAlloc<float>(p.c_elements());
    double* ds = DeviceAlloc<double>(abft::Layout(p).slots());
    CHECK_CUDA(cudaMemcpy(da, a.data(), 4 * a.size(), cudaMemcpyDefault));
    CHECK_CUDA(cudaMemcpy(db, b.data(), 4 * b.size(), cudaMemcpyDefault));
    job.batch.a = da, job.batch.b = db, job.batch.c = dc;
    job.batch.scratch = ds;
    job.batch.stride_scratch = abft::Layout(p).slots();
    job.batch.input_roundoff = InputUnitRoundoff(kernel->precision());
    if (!job.RunChecked(stream)) return 2;
    const abft::Verdict clean = job.Verdicts(stream)[0];
    if (!clean.ok()) ++false_positives;
    std::vector<float> c(p.c_elements());
    CHECK_CUDA(cudaMemcpy(c.data(), dc, 4 * c.size(), cudaMemcpyDefault));
    // What judging costs: the clean result, with and without the second
    // stage, then a constant job (0.1 everywhere: every line suspect, the
    // most verification a job does).
    auto judge_ms = [&](bool verify) {
      job.batch.verify = verify;
      cudaEvent_t start, stop;
      CHECK_CUDA(cudaEventCreate(&start));
      CHECK_CUDA(cudaEventCreate(&stop));
      float best = 1e30f;
      for (int rep = 0; rep < 5; ++rep) {
        CHECK_CUDA(cudaEventRecord(start, stream));
        job.Rejudge(stream);
        CHECK_CUDA(cudaEventRecord(stop, stream));
        CHECK_CUDA(cudaEventSynchronize(stop));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
        best = std::min(best, ms);
      }
      CHECK_CUDA(cudaEventDestroy(start));
      CHECK_CUDA(cudaEventDestroy(stop));
      job.batch.verify = true;
      return best;
    };
    cost[n][0] = judge_ms(true), cost[n][1] = judge_ms(false);
    {
      std::vector<float> tenth(std::max(a.size(), b.size()), 0.1f);
      CHECK_CUDA(cudaMemcpy(da, tenth.data(), 4 * a.size(), cudaMemcpyDefault));
      CHECK_CUDA(cudaMemcpy(db, tenth.data(), 4 * b.size(), cudaMemcpyDefault));
      if (!job.RunChecked(stream)) return 2;
      const abft::Verdict v = job.Verdicts(stream)[0];
      if (!v.ok()) ++false_positives;
      cost[n][2] = judge_ms(true), cost[n][3] = judge_ms(false);
      cost[n][4] = static_cast<double>(v.verified_lines);
      CHECK_CUDA(cudaMemcpy(da, a.data(), 4 * a.size(), cudaMemcpyDefault));
      CHECK_CUDA(cudaMemcpy(db, b.data(), 4 * b.size(), cudaMemcpyDefault));
      // The random job again: its predictions and its result.
      if (!job.RunChecked(stream)) return 2;
      if (!job.Verdicts(stream)[0].ok()) ++false_positives;
      CHECK_CUDA(cudaMemcpy(c.data(), dc, 4 * c.size(), cudaMemcpyDefault));
    }
    for (int e = 0; e < o.elements; ++e) {
      // An element at or above its row's RMS.
      uint64_t at = 0;
      for (int tries = 0; tries < 100; ++tries) {
        at = rng() % p.c_elements();
        const uint64_t row = at / n;
        double square = 0;
        for (uint32_t j = 0; j < n; ++j)
          square += double{c[row * n + j]} * c[row * n + j];
        if (std::fabs(c[at]) >= std::sqrt(square / n)) break;
      }
      for (const int bit : bits) {
        uint32_t word;
        std::memcpy(&word, &c[at], 4);
        word ^= 1u << bit;
        CHECK_CUDA(
            cudaMemcpyAsync(dc + at, &word, 4, cudaMemcpyDefault, stream));
        std::array<int, 3>& cell = table[n][bit];
        for (const bool verify : {true, false}) {
          job.batch.verify = verify;
          job.Rejudge(stream);
          if (!job.Verdicts(stream)[0].ok()) ++cell[verify ? 0 : 1];
        }
        job.batch.verify = true;
        ++cell[2];
        CHECK_CUDA(
            cudaMemcpyAsync(dc + at, &c[at], 4, cudaMemcpyDefault, stream));
      }
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaFree(da));
    CHECK_CUDA(cudaFree(db));
    CHECK_CUDA(cudaFree(dc));
    CHECK_CUDA(cudaFree(ds));
  }
  // The table: a row per bit, a column per size.
  std::string header = absl::StrFormat("%-14s", "bit");
  for (const uint32_t n : o.sizes) {
    absl::StrAppend(
        &header, absl::StrFormat(" %20s", absl::StrCat(n, "^3 (lines alone)")));
  }
  std::printf("%s: caught / tried, elements at or above their row's RMS\n%s\n",
              o.kernel.c_str(), header.c_str());
  std::vector<std::string> rows_json;
  for (const int bit : bits) {
    const std::string what = bit == 31   ? "31 (sign)"
                             : bit >= 23 ? absl::StrCat(bit, " (exponent)")
                                         : absl::StrCat(bit, " (mantissa)");
    std::string line = absl::StrFormat("%-14s", what);
    std::vector<std::string> cells;
    for (const uint32_t n : o.sizes) {
      const auto& cell = table[n][bit];
      line += absl::StrFormat(
          " %20s", absl::StrFormat("%d/%d (%d)", cell[0], cell[2], cell[1]));
      cells.push_back(absl::StrFormat(
          "{\"size\": %d, \"caught\": %d, \"caught_by_lines\": %d, "
          "\"tried\": %d}",
          n, cell[0], cell[1], cell[2]));
    }
    std::printf("%s\n", line.c_str());
    rows_json.push_back(absl::StrFormat("{\"bit\": %d, \"sizes\": [%s]}", bit,
                                        absl::StrJoin(cells, ", ")));
  }
  std::printf("clean results failing: %d\n", false_positives);
  std::printf("%-8s %12s %12s %14s %14s %9s\n", "size", "judge ms",
              "lines only", "constant ms", "lines only", "verified");
  std::vector<std::string> cost_json;
  for (const auto& [n, t] : cost) {
    std::printf("%-8u %12.3f %12.3f %14.3f %14.3f %9.0f\n", n, t[0], t[1], t[2],
                t[3], t[4]);
    cost_json.push_back(absl::StrFormat(
        "{\"size\": %d, \"judge_ms\": %.4f, \"judge_lines_only_ms\": %.4f, "
        "\"constant_judge_ms\": %.4f, \"constant_lines_only_ms\": %.4f, "
        "\"constant_verified_lines\": %.0f}",
        n, t[0], t[1], t[2], t[3], t[4]));
  }
  *json = absl::StrFormat(
      "{\"run\": \"detect\", \"kernel\": \"%s\", \"false_positives\": %d, "
      "\"bits\": [%s],\n \"cost\": [%s]}",
      o.kernel, false_positives, absl::StrJoin(rows_json, ",\n  "),
      absl::StrJoin(cost_json, ",\n  "));
  return false_positives == 0 ? 0 : 1;
}

}  // namespace gemm::kernels::check_bench

int main(int argc, char** argv) {
  using namespace gemm::kernels::check_bench;
  CLI::App app{
      "The result check (ABFT) on the device: detection and a "
      "false-positive soak"};
  bool detect = false, soak = false;
  DetectOptions d;
  SoakOptions s;
  std::string json_path;
  app.add_flag("--detect", detect,
               "flip bits of results, count what is caught");
  app.add_flag("--soak", soak, "check clean results of every kernel");
  app.add_option("--sizes", d.sizes, "--detect: square sizes")->delimiter(',');
  app.add_option("--kernel", d.kernel, "--detect: the kernel");
  app.add_option("--elements", d.elements,
                 "--detect: elements flipped per size (each at every bit)");
  app.add_option("--jobs", s.jobs, "--soak: jobs per kernel and kind of data");
  app.add_option("--kernels", s.kernels, "--soak: comma-separated, or all");
  app.add_option("--json", json_path, "write the report here");
  CLI11_PARSE(app, argc, argv);
  if (detect == soak) {
    std::fprintf(stderr, "check-bench: one of --detect or --soak\n");
    return 2;
  }
  std::string json;
  const int rc = detect ? Detect(d, &json) : Soak(s, &json);
  if (!json_path.empty()) std::ofstream(json_path) << json << "\n";
  return rc;
}
