// gemm-client: the command line of gemm-service.
//
//   gemm-client info --server localhost:50051
//   gemm-client run --server localhost:50051 -m 1000 -n 999 -k 777 --verify
//   gemm-client run --a a.npy --b b.npy --out c.npy --kernel cublas
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/gemm_client.h"
#include "client/npy.h"
#include "client/reference_gemm.h"
#include "server/version.h"

namespace gemm::client {
namespace {

struct CommonFlags {
  std::string server = "localhost:50051";
  double timeout_s = 0;
  uint64_t chunk_bytes = uint64_t{1} << 20;
};

absl::StatusOr<std::unique_ptr<GemmClient>> Connect(const CommonFlags& f) {
  GemmClient::Options options;
  options.target = f.server;
  options.chunk_bytes = f.chunk_bytes;
  options.timeout = absl::Seconds(f.timeout_s);
  return GemmClient::Create(options);
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "gemm-client: %s\n", status.ToString().c_str());
  return 1;
}

int RunInfo(const CommonFlags& flags) {
  auto client = Connect(flags);
  if (!client.ok()) return Fail(client.status());
  auto info = (*client)->Info();
  if (!info.ok()) return Fail(info.status());
  std::printf("server   %s (gemm-service %s)\n", flags.server.c_str(),
              info->version().c_str());
  std::printf("backend  %s\n", info->backend().c_str());
  for (const auto& d : info->devices()) {
    std::printf("device   %s: %s", d.id().c_str(), d.name().c_str());
    if (d.memory_bytes() > 0) {
      std::printf(", %.1f GiB", d.memory_bytes() / double(1 << 30));
    }
    if (!d.compute_capability().empty()) {
      std::printf(", sm %s", d.compute_capability().c_str());
    }
    std::printf("\n");
  }
  std::vector<std::string> kernels(info->kernels().begin(),
                                   info->kernels().end());
  std::printf("kernels  auto, %s\n", absl::StrJoin(kernels, ", ").c_str());
  const auto& l = info->limits();
  std::printf(
      "limits   max_dim %u, max_job_bytes %llu, max_message_bytes %llu, "
      "max_queued_jobs %u, max_inflight_bytes %llu, result_chunk_bytes %llu\n",
      l.max_dim(), (unsigned long long)l.max_job_bytes(),
      (unsigned long long)l.max_message_bytes(), l.max_queued_jobs(),
      (unsigned long long)l.max_inflight_bytes(),
      (unsigned long long)l.result_chunk_bytes());
  std::printf("batching max_batch_size %u, max_queue_delay %llu us\n",
              info->batching().max_batch_size(),
              (unsigned long long)info->batching().max_queue_delay_us());
  return 0;
}

struct RunFlags {
  uint32_t m = 1024, n = 1024, k = 1024;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 0.0f;
  std::string kernel = "auto";
  std::string a_path, b_path, c_path, out_path;
  bool verify = false;
  int repeat = 1;
  uint64_t seed = 42;
  uint32_t job_timeout_ms = 0;
};

// Loads an operand from .npy, checking it has the rows and columns the
// shape needs.
absl::Status LoadOperand(const std::string& path, const char* name,
                         uint64_t rows, uint64_t cols, std::vector<float>* out) {
  auto matrix = ReadNpy(path);
  if (!matrix.ok()) return matrix.status();
  if (matrix->rows != rows || matrix->cols != cols) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--%s %s: is %dx%d, the shape needs %dx%d", name, path, matrix->rows,
        matrix->cols, rows, cols));
  }
  *out = std::move(matrix->data);
  return absl::OkStatus();
}

int RunGemm(const CommonFlags& flags, RunFlags r) {
  std::vector<float> a, b, c;
  // Shapes come from the files where given.
  if (!r.a_path.empty()) {
    auto matrix = ReadNpy(r.a_path);
    if (!matrix.ok()) return Fail(matrix.status());
    r.m = r.trans_a ? matrix->cols : matrix->rows;
    r.k = r.trans_a ? matrix->rows : matrix->cols;
    a = std::move(matrix->data);
  }
  if (!r.b_path.empty()) {
    auto matrix = ReadNpy(r.b_path);
    if (!matrix.ok()) return Fail(matrix.status());
    const uint64_t kb = r.trans_b ? matrix->cols : matrix->rows;
    r.n = r.trans_b ? matrix->rows : matrix->cols;
    if (!r.a_path.empty() && kb != r.k) {
      return Fail(absl::InvalidArgumentError(absl::StrFormat(
          "--b %s: has K=%d, but --a gives K=%d", r.b_path, kb, r.k)));
    }
    r.k = kb;
    b = std::move(matrix->data);
  }
  const uint64_t a_rows = r.trans_a ? r.k : r.m, a_cols = r.trans_a ? r.m : r.k;
  const uint64_t b_rows = r.trans_b ? r.n : r.k, b_cols = r.trans_b ? r.k : r.n;
  if (!r.a_path.empty() && !r.b_path.empty()) {
    // Already loaded.
  } else {
    if (a.empty()) {
      a.resize(a_rows * a_cols);
      FillRandom(a.data(), a.size(), r.seed);
    }
    if (b.empty()) {
      b.resize(b_rows * b_cols);
      FillRandom(b.data(), b.size(), r.seed + 1);
    }
  }
  if (!r.c_path.empty()) {
    absl::Status s = LoadOperand(r.c_path, "c", r.m, r.n, &c);
    if (!s.ok()) return Fail(s);
  } else if (r.beta != 0.0f) {
    c.resize(uint64_t{r.m} * r.n);
    FillRandom(c.data(), c.size(), r.seed + 2);
  }

  auto client = Connect(flags);
  if (!client.ok()) return Fail(client.status());
  GemmArgs args;
  args.m = r.m;
  args.n = r.n;
  args.k = r.k;
  args.trans_a = r.trans_a;
  args.trans_b = r.trans_b;
  args.alpha = r.alpha;
  args.beta = r.beta;
  args.kernel = r.kernel;
  args.timeout_ms = r.job_timeout_ms;
  args.a = a.data();
  args.b = b.data();
  args.c = c.empty() ? nullptr : c.data();

  std::vector<double> want;
  if (r.verify) {
    GemmSpec spec{r.m, r.n, r.k, r.trans_a, r.trans_b, r.alpha, r.beta};
    want = ReferenceGemm(spec, a.data(), b.data(), args.c);
  }
  const double mb_moved =
      (4.0 * (a.size() + b.size() + c.size()) + 4.0 * r.m * r.n) / 1e6;
  std::printf("GEMM %ux%ux%u%s%s alpha=%g beta=%g kernel=%s via %s\n", r.m,
              r.n, r.k, r.trans_a ? " A^T" : "", r.trans_b ? " B^T" : "",
              r.alpha, r.beta, r.kernel.c_str(), flags.server.c_str());
  std::vector<float> out(uint64_t{r.m} * r.n);
  int failures = 0;
  for (int i = 0; i < r.repeat; ++i) {
    // Poison the output, so that an unwritten element cannot pass.
    std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
    const auto start = std::chrono::steady_clock::now();
    auto timing = (*client)->Gemm(args, out.data());
    const double client_ms = std::chrono::duration<double, std::milli>(
                                 std::chrono::steady_clock::now() - start)
                                 .count();
    if (!timing.ok()) return Fail(timing.status());
    std::printf(
        "run %d: client %.3f ms | server %.3f ms = queue %.3f + h2d %.3f + "
        "compute %.3f + d2h %.3f | batch %u | %s on %s | %.1f GFLOP/s "
        "compute, %.1f end to end | %.1f MB moved",
        i + 1, client_ms, timing->server_ms(), timing->queue_ms(),
        timing->h2d_ms(), timing->compute_ms(), timing->d2h_ms(),
        timing->batch_size(), timing->kernel().c_str(),
        timing->device().c_str(), timing->gflops(),
        2.0 * r.m * r.n * r.k / (client_ms * 1e6), mb_moved);
    if (r.verify) {
      const double err = RelativeFrobeniusError(out.data(), want);
      const bool ok = err <= 1e-5;
      if (!ok) ++failures;
      std::printf(" | rel. error %.2e vs float64 %s", err,
                  ok ? "OK" : "FAILED (> 1e-5)");
    }
    std::printf("\n");
  }
  if (!r.out_path.empty()) {
    absl::Status s = WriteNpy(r.out_path, r.m, r.n, out.data());
    if (!s.ok()) return Fail(s);
    std::printf("wrote C to %s\n", r.out_path.c_str());
  }
  return failures == 0 ? 0 : 2;
}

}  // namespace
}  // namespace gemm::client

int main(int argc, char** argv) {
  using namespace gemm::client;
  CLI::App app{"gemm-client: submits GEMMs to a gemm-server"};
  app.set_version_flag("--version", std::string(gemm::kVersion));
  app.require_subcommand(1);
  CommonFlags common;
  auto add_common = [&common](CLI::App* sub) {
    sub->add_option("-s,--server", common.server, "server host:port")
        ->capture_default_str();
    sub->add_option("--timeout-s", common.timeout_s,
                    "deadline of each call in seconds (0: none)")
        ->capture_default_str();
    sub->add_option("--chunk-bytes", common.chunk_bytes,
                    "chunk size for jobs sent over the stream")
        ->capture_default_str();
  };

  CLI::App* info = app.add_subcommand("info", "what the server runs on");
  add_common(info);

  RunFlags run_flags;
  CLI::App* run = app.add_subcommand(
      "run", "one GEMM on random matrices or .npy files, with timings");
  add_common(run);
  run->add_option("-m", run_flags.m, "rows of op(A) and C")->capture_default_str();
  run->add_option("-n", run_flags.n, "columns of op(B) and C")->capture_default_str();
  run->add_option("-k", run_flags.k, "columns of op(A), rows of op(B)")->capture_default_str();
  run->add_flag("--trans-a", run_flags.trans_a, "use A transposed");
  run->add_flag("--trans-b", run_flags.trans_b, "use B transposed");
  run->add_option("--alpha", run_flags.alpha)->capture_default_str();
  run->add_option("--beta", run_flags.beta)->capture_default_str();
  run->add_option("--kernel", run_flags.kernel, "auto or a kernel from `info`")
      ->capture_default_str();
  run->add_option("--a", run_flags.a_path, "A from a .npy file (sets M, K)");
  run->add_option("--b", run_flags.b_path, "B from a .npy file (sets K, N)");
  run->add_option("--c", run_flags.c_path, "C from a .npy file (with --beta)");
  run->add_option("--out", run_flags.out_path, "write C to this .npy file");
  run->add_flag("--verify", run_flags.verify,
                "check C against a float64 CPU reference (rel. error <= 1e-5)");
  run->add_option("--repeat", run_flags.repeat, "times to run the job")
      ->capture_default_str();
  run->add_option("--seed", run_flags.seed, "seed of the random matrices")
      ->capture_default_str();
  run->add_option("--job-timeout-ms", run_flags.job_timeout_ms,
                  "server-side budget of the job (0: none)");

  CLI11_PARSE(app, argc, argv);
  if (info->parsed()) return RunInfo(common);
  return RunGemm(common, run_flags);
}
