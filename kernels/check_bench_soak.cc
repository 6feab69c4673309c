// check-bench --soak (check_bench.h says what it does).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/abft.h"
#include "common/abft_data.h"
#include "kernels/check_bench.h"

namespace gemm::kernels::check_bench {
namespace {

using abft::CheckData;
using abft::kCheckDataNames;

struct SoakCell {
  uint64_t jobs = 0, false_positives = 0, suspect = 0, verified = 0,
           unchecked = 0, skipped = 0;
  double worst = 0;
};

}  // namespace

int Soak(const SoakOptions& o, std::string* json) {
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  std::mt19937_64 rng(o.seed);
  // A pool of each kind; a job's operands start at random offsets in it.
  constexpr uint64_t kPool = uint64_t{24} << 20;
  std::vector<float*> pools;
  {
    std::vector<float> host(kPool);
    for (int kind = 0; kind < 4; ++kind) {
      abft::FillCheckData(host.data(), kPool, static_cast<CheckData>(kind),
                          rng);
      pools.push_back(DeviceAlloc<float>(kPool));
      CHECK_CUDA(
          cudaMemcpy(pools.back(), host.data(), 4 * kPool, cudaMemcpyDefault));
    }
  }
  constexpr int kMaxCount = 64;
  float* dc = DeviceAlloc<float>(kPool);
  double* ds = DeviceAlloc<double>(uint64_t{8} << 20);
  std::vector<std::string> names = KernelRegistry::Global().Names();
  if (o.kernels != "all") names = absl::StrSplit(o.kernels, ',');
  // Larger shapes, now and then: where the screen and verification work.
  const GemmProblem larger[] = {{.m = 1000, .n = 999, .k = 777},
                                {.m = 2048, .n = 2048, .k = 64},
                                {.m = 64, .n = 64, .k = 8192},
                                {.m = 16, .n = 4096, .k = 1024},
                                {.m = 1536, .n = 1024, .k = 2048}};
  const float scales[] = {1.0f, -0.5f, 3.25f, 1e-3f};
  std::map<std::string, std::array<SoakCell, 4>> cells;
  int status = 0;
  for (const std::string& name : names) {
    const SgemmKernel* kernel = KernelRegistry::Global().Find(name);
    if (kernel == nullptr || !kernel->RunsOnDevice(0)) continue;
    for (int kind = 0; kind < 4; ++kind) {
      SoakCell& cell = cells[name][kind];
      while (cell.jobs + cell.skipped < static_cast<uint64_t>(o.jobs)) {
        Launch job;
        job.kernel = kernel;
        GemmProblem& p = job.batch.problem;
        const bool large = rng() % 64 == 0;
        if (large) {
          p = larger[rng() % 5];
        } else {
          std::uniform_int_distribution<uint32_t> dim(1,
                                                      name == "v0" ? 160 : 300);
          p.m = dim(rng), p.n = dim(rng), p.k = dim(rng);
        }
        p.trans_a = rng() & 1, p.trans_b = rng() & 1;
        p.alpha = scales[rng() % 4];
        p.beta = rng() % 3 == 0 ? scales[rng() % 4] : 0.0f;
        const int count = large ? 1 : 1 + static_cast<int>(rng() % kMaxCount);
        const abft::Layout l(p);
        job.batch.count = count;
        // Members read neighbouring stretches of the pool.
        job.batch.stride_a = p.a_elements() + 4 * (rng() % 8);
        job.batch.stride_b = p.b_elements() + 4 * (rng() % 8);
        job.batch.stride_c = p.c_elements();
        job.batch.stride_scratch = (l.slots() + 31) / 32 * 32;
        const uint64_t need_a = job.batch.stride_a * count,
                       need_b = job.batch.stride_b * count,
                       need_c = p.c_elements() * count;
        if (need_a + 64 > kPool || need_b + 64 > kPool || need_c > kPool ||
            static_cast<uint64_t>(job.batch.stride_scratch) * count >
                (uint64_t{8} << 20)) {
          continue;
        }
        // 16-byte aligned mostly, now and then not (the kernels' scalar paths).
        const uint64_t align = rng() % 8 == 0 ? 1 : 4;
        const float* pool = pools[kind];
        job.batch.a = pool + (rng() % (kPool - need_a - 64)) / align * align;
        job.batch.b = pool + (rng() % (kPool - need_b - 64)) / align * align;
        job.batch.c = dc;
        job.batch.scratch = ds;
        job.batch.input_roundoff = InputUnitRoundoff(kernel->precision());
        if (p.beta != 0.0f) {
          CHECK_CUDA(cudaMemcpyAsync(dc, pool + rng() % (kPool - need_c),
                                     4 * need_c, cudaMemcpyDefault, stream));
        }
        if (!kernel->CanImplement(job.Args()).ok() || !job.RunChecked(stream)) {
          cell.skipped += count;
          continue;
        }
        for (const abft::Verdict& v : job.Verdicts(stream)) {
          ++cell.jobs;
          if (!v.ok()) {
            ++cell.false_positives;
            status = 1;
            std::fprintf(
                stderr, "false positive: %s %s %s: %s at %.3g\n", name.c_str(),
                kCheckDataNames[kind], p.ToString().c_str(),
                abft::LineName(p, v.worst_line).c_str(), v.worst_ratio);
          }
          cell.suspect += v.suspect_lines;
          cell.verified += v.verified_lines;
          cell.unchecked += v.unchecked_lines;
          cell.worst = std::max(cell.worst, v.worst_ratio);
        }
      }
    }
  }
  std::printf("%-12s %-11s %9s %7s %9s %9s %11s %8s\n", "kernel", "data",
              "jobs", "false+", "suspect", "verified", "unchecked", "worst");
  uint64_t total = 0, total_fp = 0;
  std::vector<std::string> rows_json;
  for (const auto& [name, row] : cells) {
    for (int kind = 0; kind < 4; ++kind) {
      const SoakCell& c = row[kind];
      total += c.jobs, total_fp += c.false_positives;
      std::printf("%-12s %-11s %9llu %7llu %9llu %9llu %11llu %8.3g\n",
                  name.c_str(), kCheckDataNames[kind],
                  static_cast<unsigned long long>(c.jobs),
                  static_cast<unsigned long long>(c.false_positives),
                  static_cast<unsigned long long>(c.suspect),
                  static_cast<unsigned long long>(c.verified),
                  static_cast<unsigned long long>(c.unchecked), c.worst);
      rows_json.push_back(absl::StrFormat(
          "{\"kernel\": \"%s\", \"data\": \"%s\", \"jobs\": %d, "
          "\"false_positives\": %d, \"suspect_lines\": %d, "
          "\"verified_lines\": %d, \"unchecked_lines\": %d, "
          "\"worst_ratio\": %.6g}",
          name, kCheckDataNames[kind], c.jobs, c.false_positives, c.suspect,
          c.verified, c.unchecked, c.worst));
    }
  }
  std::printf("soak: %llu checked jobs, %llu false positives\n",
              static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(total_fp));
  *json = absl::StrFormat(
      "{\"run\": \"soak\", \"jobs\": %d, \"false_positives\": %d, "
      "\"cells\": [%s]}",
      total, total_fp, absl::StrJoin(rows_json, ",\n  "));
  return status;
}

}  // namespace gemm::kernels::check_bench
