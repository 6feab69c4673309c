// gemm-client: the command line of gemm-service.
//
//   gemm-client info --server localhost:50051
//   gemm-client run --server localhost:50051 -m 1000 -n 999 -k 777 --verify
//   gemm-client run --a a.npy --b b.npy --out c.npy --kernel cublas
//   gemm-client load --server h1:50051,h2:50051 --concurrency 64 --duration-s 60
//   gemm-client kernels --server localhost:50051 -m 4096 -n 4096 -k 4096
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/gemm_client.h"
#include "client/load_generator.h"
#include "client/npy.h"
#include "common/reference_gemm.h"
#include "common/version.h"
#include "common/process_tuning.h"

namespace gemm::client {
namespace {

struct CommonFlags {
  std::string server = "localhost:50051";
  int connections = 1;
  double timeout_s = 0;
  uint64_t chunk_bytes = GemmClient::Options().chunk_bytes;
  uint64_t whole_job_bytes = GemmClient::Options().whole_job_max_bytes;
  uint64_t inline_result_bytes = GemmClient::Options().inline_result_max_bytes;
  int http2_stream_window_bytes = 0;
  int http2_max_frame_bytes = 0;
  int split_rows = 1;
  bool coalesce_small_writes = false;
  uint64_t split_min_bytes = GemmClient::Options().split_min_bytes;
  int max_attempts = 1;
  double initial_backoff_ms = 50;
  double max_backoff_ms = 2000;
};

absl::StatusOr<std::unique_ptr<GemmClient>> Connect(const CommonFlags& f) {
  GemmClient::Options options;
  std::vector<std::string> targets =
      absl::StrSplit(f.server, ',', absl::SkipWhitespace());
  if (targets.size() == 1) options.target = targets[0];
  if (targets.size() > 1) options.targets = targets;
  options.connections_per_target = f.connections;
  options.chunk_bytes = f.chunk_bytes;
  options.whole_job_max_bytes = f.whole_job_bytes;
  options.inline_result_max_bytes = f.inline_result_bytes;
  options.http2_stream_window_bytes = f.http2_stream_window_bytes;
  options.http2_max_frame_bytes = f.http2_max_frame_bytes;
  options.split_rows = f.split_rows;
  options.coalesce_small_writes = f.coalesce_small_writes;
  options.split_min_bytes = f.split_min_bytes;
  options.timeout = absl::Seconds(f.timeout_s);
  options.retry.max_attempts = f.max_attempts;
  options.retry.initial_backoff = absl::Milliseconds(f.initial_backoff_ms);
  options.retry.max_backoff = absl::Milliseconds(f.max_backoff_ms);
  return GemmClient::Create(options);
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
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
  std::printf("stats    jobs ok %llu, failed %llu, rejected %llu; up %.1f s\n",
              (unsigned long long)info->stats().jobs_ok(),
              (unsigned long long)info->stats().jobs_failed(),
              (unsigned long long)info->stats().jobs_rejected(),
              info->stats().uptime_s());
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
  args.problem = GemmProblem{r.m, r.n, r.k, r.trans_a, r.trans_b, r.alpha,
                             r.beta};
  args.kernel = r.kernel;
  args.timeout_ms = r.job_timeout_ms;
  args.a = a.data();
  args.b = b.data();
  args.c = c.empty() ? nullptr : c.data();

  std::vector<double> want;
  if (r.verify) {
    want = ReferenceGemm(args.problem, a.data(), b.data(), args.c);
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

struct LoadFlags {
  std::string shapes = "128x128x128";
  std::string kernel = "auto";
  int concurrency = 16;
  double rate = 0;
  std::string arrivals = "constant";
  double duration_s = 10;
  uint64_t count = 0;
  double warmup_s = 1;
  int streams_per_connection = 1;
  uint32_t job_timeout_ms = 0;
  uint64_t verify_every = 0;
  uint64_t seed = 42;
  std::string json_path, csv_path, plot_prefix;
  bool quiet = false;
};

// plot_load.py: next to the binary in its runfiles, or where
// GEMM_CLIENT_PLOT_SCRIPT says.
std::string PlotScriptPath(const char* argv0) {
  if (const char* env = std::getenv("GEMM_CLIENT_PLOT_SCRIPT")) return env;
  const std::string self = argv0;
  for (const std::string& candidate :
       {self + ".runfiles/gemm_service/client/plot_load.py",
        self.substr(0, self.rfind('/') + 1) + "plot_load.py",
        std::string("client/plot_load.py")}) {
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return "client/plot_load.py";
}

int RunLoadTest(const CommonFlags& flags, const LoadFlags& l, bool rate_cap,
                const char* argv0) {
  LoadOptions options;
  auto shapes = ParseShapeMix(l.shapes);
  if (!shapes.ok()) return Fail(shapes.status());
  options.shapes = *shapes;
  options.kernel = l.kernel;
  options.rate = l.rate;
  // In rate mode the concurrency caps jobs outstanding only when given.
  options.concurrency = l.rate > 0 && !rate_cap ? 0 : l.concurrency;
  options.poisson = l.arrivals == "poisson";
  options.duration = absl::Seconds(l.duration_s);
  options.count = l.count;
  options.warmup = absl::Seconds(l.warmup_s);
  options.job_timeout_ms = l.job_timeout_ms;
  options.streams_per_connection = l.streams_per_connection;
  options.verify_every = l.verify_every;
  options.seed = l.seed;
  if (!l.quiet) {
    const bool tty = isatty(STDERR_FILENO);
    options.on_progress = [tty](const LoadProgress& p) {
      std::fprintf(stderr,
                   "%s[%5.0f s]%s sent %llu, done %llu, errors %llu, in flight "
                   "%llu | last 1 s: %.0f ok/s, p50 %.3f ms, p99 %.3f ms%s",
                   tty ? "\r" : "", p.elapsed_s,
                   p.warming_up ? " warm-up" : "",
                   (unsigned long long)p.sent, (unsigned long long)p.completed,
                   (unsigned long long)p.errors,
                   (unsigned long long)p.in_flight, p.last_second_rps,
                   p.last_second_p50_ms, p.last_second_p99_ms,
                   tty ? "\033[K" : "\n");
      std::fflush(stderr);
    };
  }
  auto client = Connect(flags);
  if (!client.ok()) return Fail(client.status());
  auto report = RunLoad(client->get(), options);
  if (!l.quiet && isatty(STDERR_FILENO)) std::fprintf(stderr, "\n");
  if (!report.ok()) return Fail(report.status());
  std::printf("%s", FormatReportText(*report).c_str());
  std::string json_path = l.json_path;
  if (!l.plot_prefix.empty() && json_path.empty()) {
    json_path = l.plot_prefix + ".json";
  }
  if (!json_path.empty()) {
    absl::Status s = WriteFile(json_path, FormatReportJson(*report));
    if (!s.ok()) return Fail(s);
  }
  if (!l.csv_path.empty()) {
    absl::Status s = WriteFile(l.csv_path, FormatReportCsv(*report));
    if (!s.ok()) return Fail(s);
  }
  if (!l.plot_prefix.empty()) {
    // Debian's matplotlib lives with /usr/bin/python3, which may not be the
    // first python3 on PATH.
    const char* python = std::getenv("GEMM_CLIENT_PYTHON");
    if (python == nullptr) {
      python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3"
                                                     : "python3";
    }
    const std::string command =
        absl::StrCat(python, " '", PlotScriptPath(argv0), "' '", json_path,
                     "' '", l.plot_prefix, "'");
    if (std::system(command.c_str()) != 0) {
      std::fprintf(stderr, "gemm-client: --plot failed: %s\n",
                   command.c_str());
      return 3;
    }
  }
  return report->verify_failures == 0 ? 0 : 2;
}

struct KernelsFlags {
  uint32_t m = 4096, n = 4096, k = 4096;
  int warmup = 1;
  int repeat = 3;
  bool verify = false;
  std::string json_path;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Every kernel Info lists, on one shape, timed by the server and the client.
int RunKernels(const CommonFlags& flags, const KernelsFlags& f) {
  auto client = Connect(flags);
  if (!client.ok()) return Fail(client.status());
  auto info = (*client)->Info();
  if (!info.ok()) return Fail(info.status());
  std::vector<float> a(uint64_t{f.m} * f.k), b(uint64_t{f.k} * f.n),
      out(uint64_t{f.m} * f.n);
  FillRandom(a.data(), a.size(), 1);
  FillRandom(b.data(), b.size(), 2);
  std::vector<double> want;
  if (f.verify) {
    want = ReferenceGemm({f.m, f.n, f.k, false, false, 1, 0}, a.data(),
                         b.data(), nullptr);
  }
  const double flop = 2.0 * f.m * f.n * f.k;
  struct Row {
    std::string kernel;
    double compute_ms = 0, server_ms = 0, client_ms = 0, error = -1;
    std::string failure;
  };
  std::vector<Row> rows;
  for (const std::string& kernel : info->kernels()) {
    Row row;
    row.kernel = kernel;
    GemmArgs args;
    args.problem = GemmProblem{f.m, f.n, f.k};
    args.kernel = kernel;
    args.a = a.data();
    args.b = b.data();
    std::vector<double> compute, server, end_to_end;
    for (int i = 0; i < f.warmup + f.repeat; ++i) {
      const auto start = std::chrono::steady_clock::now();
      auto timing = (*client)->Gemm(args, out.data());
      const double ms = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start)
                            .count();
      if (!timing.ok()) {
        row.failure = timing.status().ToString();
        break;
      }
      if (i < f.warmup) continue;
      compute.push_back(timing->compute_ms());
      server.push_back(timing->server_ms());
      end_to_end.push_back(ms);
    }
    row.compute_ms = Median(compute);
    row.server_ms = Median(server);
    row.client_ms = Median(end_to_end);
    if (f.verify && row.failure.empty()) {
      row.error = RelativeFrobeniusError(out.data(), want);
    }
    rows.push_back(row);
  }
  // The yardstick: cuBLAS when the server has it, else the best kernel.
  double base_ms = 0;
  std::string base = "cublas";
  for (const Row& row : rows) {
    if (row.kernel == "cublas" && row.failure.empty()) base_ms = row.compute_ms;
  }
  if (base_ms == 0) {
    base = "best";
    for (const Row& row : rows) {
      if (row.failure.empty() && row.compute_ms > 0 &&
          (base_ms == 0 || row.compute_ms < base_ms)) {
        base_ms = row.compute_ms;
      }
    }
  }
  std::printf("GEMM %ux%ux%u on %s (%s), median of %d after %d warm-up\n",
              f.m, f.n, f.k, flags.server.c_str(), info->backend().c_str(),
              f.repeat, f.warmup);
  std::printf("| kernel | compute ms | TFLOP/s | %% of %s | server ms | "
              "client ms | client TFLOP/s |%s\n",
              base.c_str(), f.verify ? " rel. error |" : "");
  std::printf("|---|---:|---:|---:|---:|---:|---:|%s\n",
              f.verify ? "---:|" : "");
  std::vector<std::string> json_rows;
  for (const Row& row : rows) {
    if (!row.failure.empty()) {
      std::printf("| %s | failed: %s |\n", row.kernel.c_str(),
                  row.failure.c_str());
      continue;
    }
    const double tflops = row.compute_ms > 0 ? flop / row.compute_ms / 1e9 : 0;
    const double client_tflops = flop / row.client_ms / 1e9;
    const double percent =
        row.compute_ms > 0 && base_ms > 0 ? 100.0 * base_ms / row.compute_ms : 0;
    std::printf("| %s | %.3f | %.3f | %.1f | %.3f | %.3f | %.3f |", row.kernel.c_str(),
                row.compute_ms, tflops, percent, row.server_ms, row.client_ms,
                client_tflops);
    if (f.verify) std::printf(" %.2e |", row.error);
    std::printf("\n");
    json_rows.push_back(absl::StrFormat(
        "{\"kernel\": \"%s\", \"compute_ms\": %.6g, \"tflops\": %.6g, "
        "\"percent_of_base\": %.6g, \"server_ms\": %.6g, \"client_ms\": "
        "%.6g}",
        row.kernel, row.compute_ms, tflops, percent, row.server_ms,
        row.client_ms));
  }
  if (!f.json_path.empty()) {
    absl::Status s = WriteFile(
        f.json_path,
        absl::StrFormat("{\"m\": %u, \"n\": %u, \"k\": %u, \"base\": "
                        "\"%s\", \"kernels\": [%s]}\n",
                        f.m, f.n, f.k, base, absl::StrJoin(json_rows, ", ")));
    if (!s.ok()) return Fail(s);
  }
  for (const Row& row : rows) {
    if (!row.failure.empty() || (f.verify && !(row.error <= 1e-5))) return 2;
  }
  return 0;
}

}  // namespace
}  // namespace gemm::client

int main(int argc, char** argv) {
  gemm::TuneProcess();
  using namespace gemm::client;
  CLI::App app{"gemm-client: submits GEMMs to a gemm-server"};
  app.set_version_flag("--version", std::string(gemm::kVersion));
  app.require_subcommand(1);
  CommonFlags common;
  auto add_common = [&common](CLI::App* sub) {
    sub->add_option("-s,--server", common.server,
                    "server host:port, or several separated by commas "
                    "(round robin)")
        ->capture_default_str();
    sub->add_option("--connections", common.connections,
                    "channels (TCP connections) per server")
        ->capture_default_str();
    sub->add_option("--max-attempts", common.max_attempts,
                    "attempts per job when the server says UNAVAILABLE "
                    "(1: no retries)")
        ->capture_default_str();
    sub->add_option("--initial-backoff-ms", common.initial_backoff_ms,
                    "wait before the first retry (doubles, +-20% jitter)")
        ->capture_default_str();
    sub->add_option("--max-backoff-ms", common.max_backoff_ms,
                    "longest wait between retries")
        ->capture_default_str();
    sub->add_option("--timeout-s", common.timeout_s,
                    "deadline of each call in seconds (0: none)")
        ->capture_default_str();
    sub->add_option("--chunk-bytes", common.chunk_bytes,
                    "chunk size for jobs sent over the stream")
        ->capture_default_str();
    sub->add_option("--whole-job-bytes", common.whole_job_bytes,
                    "stream jobs up to this size (A+B+C) go as one message; "
                    "0 for servers before 0.2.0")
        ->capture_default_str();
    sub->add_option("--inline-result-bytes", common.inline_result_bytes,
                    "stream results up to this size come back inside the "
                    "job's end record; 0: always in chunks")
        ->capture_default_str();
    sub->add_option("--http2-stream-window-bytes",
                    common.http2_stream_window_bytes,
                    "HTTP/2 flow-control window per stream: how far the "
                    "server may send results ahead of this client's reads "
                    "(0: gRPC's default)")
        ->capture_default_str();
    sub->add_option("--coalesce-small-writes", common.coalesce_small_writes,
                    "let small stream messages queued back to back share a "
                    "socket write (gRPC buffer hint)")
        ->capture_default_str();
    sub->add_option("--split", common.split_rows,
                    "cut jobs of at least --split-min-bytes into this many "
                    "row blocks, sent at once over consecutive connections "
                    "(use with --connections; 1: never)")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    sub->add_option("--split-min-bytes", common.split_min_bytes,
                    "smallest job (A+B+C bytes) that --split cuts")
        ->capture_default_str();
    sub->add_option("--http2-max-frame-bytes", common.http2_max_frame_bytes,
                    "largest HTTP/2 frame accepted, 16384..16777215 (0: "
                    "gRPC's default)")
        ->check(CLI::Range(0, 16777215))
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

  LoadFlags load_flags;
  CLI::App* load = app.add_subcommand(
      "load", "network load test: many jobs, latency and throughput report");
  add_common(load);
  load->add_option("--shapes", load_flags.shapes,
                   "shape mix MxNxK[:weight],... e.g. "
                   "128x128x128:0.7,1024x1024x1024:0.3")
      ->capture_default_str();
  load->add_option("--kernel", load_flags.kernel, "auto or a kernel from `info`")
      ->capture_default_str();
  CLI::Option* concurrency =
      load->add_option("-c,--concurrency", load_flags.concurrency,
                       "jobs outstanding (closed loop); with --rate, a cap "
                       "on jobs outstanding when given")
          ->capture_default_str();
  load->add_option("-r,--rate", load_flags.rate,
                   "jobs started per second (open loop); 0: concurrency mode")
      ->capture_default_str();
  load->add_option("--arrivals", load_flags.arrivals,
                   "gaps between starts in rate mode")
      ->check(CLI::IsMember({"constant", "poisson"}))
      ->capture_default_str();
  load->add_option("-d,--duration-s", load_flags.duration_s,
                   "length of the measured part (unless --count)")
      ->capture_default_str();
  load->add_option("-n,--count", load_flags.count,
                   "jobs in the measured part (0: use --duration-s)")
      ->capture_default_str();
  load->add_option("--warmup-s", load_flags.warmup_s,
                   "warm-up left out of the figures")
      ->capture_default_str();
  load->add_option("--streams-per-connection",
                   load_flags.streams_per_connection,
                   "GemmStream calls per connection; jobs are spread over "
                   "all of them")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  load->add_option("--job-timeout-ms", load_flags.job_timeout_ms,
                   "server-side budget of each job (0: none)");
  load->add_option("--verify-every", load_flags.verify_every,
                   "check every Nth result against a float64 reference "
                   "(0: never)")
      ->capture_default_str();
  load->add_option("--seed", load_flags.seed)->capture_default_str();
  load->add_option("--json", load_flags.json_path, "write the report as JSON");
  load->add_option("--csv", load_flags.csv_path,
                   "write the summary as CSV (header and one row)");
  load->add_option("--plot", load_flags.plot_prefix,
                   "write PREFIX-latency.png and PREFIX-throughput.png "
                   "(needs python3 with matplotlib)");
  load->add_flag("-q,--quiet", load_flags.quiet, "no progress line");

  KernelsFlags kernels_flags;
  CLI::App* kernels = app.add_subcommand(
      "kernels", "every kernel of the server on one shape: the chapter's table");
  add_common(kernels);
  kernels->add_option("-m", kernels_flags.m)->capture_default_str();
  kernels->add_option("-n", kernels_flags.n)->capture_default_str();
  kernels->add_option("-k", kernels_flags.k)->capture_default_str();
  kernels->add_option("--warmup", kernels_flags.warmup,
                      "untimed runs per kernel")
      ->capture_default_str();
  kernels->add_option("--repeat", kernels_flags.repeat,
                      "timed runs per kernel (the median is shown)")
      ->capture_default_str();
  kernels->add_flag("--verify", kernels_flags.verify,
                    "check each kernel's C against a float64 reference");
  kernels->add_option("--json", kernels_flags.json_path,
                      "write the table as JSON");

  CLI11_PARSE(app, argc, argv);
  if (info->parsed()) return RunInfo(common);
  if (load->parsed()) {
    return RunLoadTest(common, load_flags, concurrency->count() > 0, argv[0]);
  }
  if (kernels->parsed()) return RunKernels(common, kernels_flags);
  return RunGemm(common, run_flags);
}
