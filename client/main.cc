// gemm-client: the command line of gemm-service. It turns flags into
// options and calls the client libraries: info_text (info), run_command
// (run), load_command (load), kernel_table (kernels).
//
//   gemm-client info --server localhost:50051
//   gemm-client run --server localhost:50051 -m 1000 -n 999 -k 777 --verify
//   gemm-client run --a a.npy --b b.npy --out c.npy --kernel cublas
//   gemm-client load --server h1:50051,h2:50051 --concurrency 64 --duration-s
//   60 gemm-client kernels --server localhost:50051 -m 4096 -n 4096 -k 4096
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "client/cli_flags.h"
#include "client/gemm_client.h"
#include "client/info_text.h"
#include "client/kernel_table.h"
#include "client/load_cli.h"
#include "client/run_command.h"
#include "client/text_file.h"
#include "common/process_tuning.h"
#include "common/version.h"

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
  bool tls = false;
  std::string tls_ca, tls_cert, tls_key, token_file;
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
  options.tls = f.tls;
  options.tls_ca_file = f.tls_ca;
  options.tls_cert_file = f.tls_cert;
  options.tls_key_file = f.tls_key;
  options.token_file = f.token_file;
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
  std::fputs(FormatInfo(flags.server, *info).c_str(), stdout);
  return 0;
}

// Exit status 0 when SERVING, 1 otherwise: a container's health check.
int RunHealth(const CommonFlags& flags, const std::string& service) {
  auto client = Connect(flags);
  if (!client.ok()) return Fail(client.status());
  auto health = (*client)->Health(service);
  if (!health.ok()) return Fail(health.status());
  std::printf("%s\n", health->c_str());
  return *health == "SERVING" ? 0 : 1;
}

int RunGemm(const CommonFlags& flags, RunOptions options,
            const std::string& memory) {
  auto where = OperandMemoryNamed(memory);
  if (!where.ok()) return Fail(where.status());
  options.memory = *where;
  auto operands = PrepareOperands(options);
  if (!operands.ok()) return Fail(operands.status());
  auto client = Connect(flags);
  if (!client.ok()) return Fail(client.status());
  auto failures =
      RunGemms(client->get(), options, *operands, flags.server, stdout);
  if (!failures.ok()) return Fail(failures.status());
  return *failures == 0 ? 0 : 2;
}

int RunKernels(const CommonFlags& flags, const KernelTableOptions& options,
               const std::string& json_path) {
  auto client = Connect(flags);
  if (!client.ok()) return Fail(client.status());
  auto table = MeasureKernels(client->get(), options);
  if (!table.ok()) return Fail(table.status());
  std::fputs(FormatKernelTableMarkdown(*table, flags.server).c_str(), stdout);
  if (!json_path.empty()) {
    absl::Status s = WriteTextFile(json_path, FormatKernelTableJson(*table));
    if (!s.ok()) return Fail(s);
  }
  return AllKernelsPassed(*table) ? 0 : 2;
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
                    "socket write (gRPC buffer hint); such a message leaves "
                    "only when the connection next writes for another "
                    "reason, so on a quiet connection it can wait")
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
    sub->add_flag("--tls", common.tls,
                  "TLS, checking the server's certificate against the "
                  "system's CAs (implied by --tls-ca, --tls-cert)");
    sub->add_option("--tls-ca", common.tls_ca,
                    "TLS: the CAs (PEM file) the server's certificate must "
                    "be signed by");
    sub->add_option("--tls-cert", common.tls_cert,
                    "mTLS: this client's certificate chain (PEM file), with "
                    "--tls-key");
    sub->add_option("--tls-key", common.tls_key,
                    "mTLS: the client certificate's private key (PEM file)");
    sub->add_option("--token-file", common.token_file,
                    "a file holding the bearer token each call carries "
                    "(needs TLS)");
    sub->add_option("--http2-max-frame-bytes", common.http2_max_frame_bytes,
                    "largest HTTP/2 frame accepted, 16384..16777215 (0: "
                    "gRPC's default)")
        ->check(CLI::Range(0, 16777215))
        ->capture_default_str();
  };

  CLI::App* info = app.add_subcommand("info", "what the server runs on");
  add_common(info);
  std::string health_service;
  CLI::App* health = app.add_subcommand(
      "health",
      "the standard gRPC health check; exit status 0 only when SERVING (a "
      "container or orchestrator probe)");
  add_common(health);
  health->add_option("--service", health_service,
                     "the service asked about (default: the whole server; "
                     "gemm.v1.GemmService for this one)");

  RunOptions run_options;
  CLI::App* run = app.add_subcommand(
      "run", "one GEMM on random matrices or .npy files, with timings");
  add_common(run);
  run->add_option("-m", run_options.problem.m, "rows of op(A) and C")
      ->capture_default_str();
  run->add_option("-n", run_options.problem.n, "columns of op(B) and C")
      ->capture_default_str();
  run->add_option("-k", run_options.problem.k,
                  "columns of op(A), rows of op(B)")
      ->capture_default_str();
  run->add_flag("--trans-a", run_options.problem.trans_a, "use A transposed");
  run->add_flag("--trans-b", run_options.problem.trans_b, "use B transposed");
  run->add_option("--alpha", run_options.problem.alpha)->capture_default_str();
  run->add_option("--beta", run_options.problem.beta)->capture_default_str();
  run->add_option("--kernel", run_options.kernel,
                  "auto or a kernel from `info`")
      ->capture_default_str();
  run->add_option("--check", run_options.check, kCheckHelp)
      ->transform(CLI::CheckedTransformer(kCheckModes, CLI::ignore_case))
      ->default_str("default");
  run->add_option("--precision", run_options.precision, kPrecisionHelp)
      ->transform(CLI::CheckedTransformer(kPrecisions, CLI::ignore_case))
      ->default_str("fp32");
  std::string run_memory = "socket";
  run->add_option("--memory", run_memory, kMemoryHelp)
      ->check(CLI::IsMember(kMemoryModes))
      ->capture_default_str();
  run->add_flag_callback(
      "--shm", [&run_memory] { run_memory = "shm"; }, "--memory shm");
  run->add_flag_callback(
      "--cuda-ipc", [&run_memory] { run_memory = "cuda-ipc"; },
      "--memory cuda-ipc");
  run->add_option("--a", run_options.a_path, "A from a .npy file (sets M, K)");
  run->add_option("--b", run_options.b_path, "B from a .npy file (sets K, N)");
  run->add_option("--c", run_options.c_path,
                  "C from a .npy file (with --beta)");
  run->add_option("--out", run_options.out_path, "write C to this .npy file");
  run->add_flag("--verify", run_options.verify,
                "check C against a float64 CPU reference (rel. error <= 1e-5)");
  run->add_option("--repeat", run_options.repeat, "times to run the job")
      ->capture_default_str();
  run->add_option("--seed", run_options.seed, "seed of the random matrices")
      ->capture_default_str();
  run->add_option("--job-timeout-ms", run_options.job_timeout_ms,
                  "server-side budget of the job (0: none)");

  LoadFlags load_flags;
  CLI::App* load = app.add_subcommand(
      "load", "network load test: many jobs, latency and throughput report");
  add_common(load);
  CLI::Option* concurrency = AddLoadFlags(load, &load_flags);

  KernelTableOptions kernels_options;
  std::string kernels_json;
  CLI::App* kernels = app.add_subcommand(
      "kernels",
      "every kernel of the server on one shape: the chapter's table");
  add_common(kernels);
  kernels->add_option("-m", kernels_options.problem.m)->capture_default_str();
  kernels->add_option("-n", kernels_options.problem.n)->capture_default_str();
  kernels->add_option("-k", kernels_options.problem.k)->capture_default_str();
  kernels
      ->add_option("--warmup", kernels_options.warmup,
                   "untimed runs per kernel")
      ->capture_default_str();
  kernels
      ->add_option("--repeat", kernels_options.repeat,
                   "timed runs per kernel (the median is shown)")
      ->capture_default_str();
  kernels->add_flag("--verify", kernels_options.verify,
                    "check each kernel's C against a float64 reference");
  kernels->add_option("--json", kernels_json, "write the table as JSON");

  CLI11_PARSE(app, argc, argv);
  if (info->parsed()) return RunInfo(common);
  if (health->parsed()) return RunHealth(common, health_service);
  if (load->parsed()) {
    auto client = Connect(common);
    if (!client.ok()) return Fail(client.status());
    return RunLoadCommand(client->get(), load_flags, concurrency->count() > 0);
  }
  if (kernels->parsed())
    return RunKernels(common, kernels_options, kernels_json);
  return RunGemm(common, run_options, run_memory);
}
