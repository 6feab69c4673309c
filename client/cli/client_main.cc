#include "client/cli/client_main.h"

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "client/cli/cli_flags.h"
#include "client/cli/connection_flags.h"
#include "client/cli/info_text.h"
#include "client/cli/kernel_table.h"
#include "client/cli/load_cli.h"
#include "client/cli/run_command.h"
#include "client/cli/text_file.h"
#include "client/lib/gemm_client.h"
#include "common/process_tuning.h"
#include "common/version.h"

namespace gemm::client {
namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "gemm-client: %s\n", status.ToString().c_str());
  return 1;
}

int RunInfo(const ConnectionFlags& flags) {
  auto client = Connect(flags);
  if (!client.ok()) return Fail(client.status());
  auto info = (*client)->Info();
  if (!info.ok()) return Fail(info.status());
  std::fputs(FormatInfo(flags.servers, *info).c_str(), stdout);
  return 0;
}

// Exit status 0 when SERVING, 1 otherwise: a container's health check.
int RunHealth(const ConnectionFlags& flags, const std::string& service) {
  auto client = Connect(flags);
  if (!client.ok()) return Fail(client.status());
  auto health = (*client)->Health(service);
  if (!health.ok()) return Fail(health.status());
  std::printf("%s\n", health->c_str());
  return *health == "SERVING" ? 0 : 1;
}

int RunGemm(const ConnectionFlags& flags, RunOptions options,
            const std::string& memory) {
  auto where = OperandMemoryNamed(memory);
  if (!where.ok()) return Fail(where.status());
  options.memory = *where;
  auto operands = PrepareOperands(options);
  if (!operands.ok()) return Fail(operands.status());
  auto client = Connect(flags);
  if (!client.ok()) return Fail(client.status());
  auto failures =
      RunGemms(client->get(), options, *operands, flags.servers, stdout);
  if (!failures.ok()) return Fail(failures.status());
  return *failures == 0 ? 0 : 2;
}

int RunKernels(const ConnectionFlags& flags, const KernelTableOptions& options,
               const std::string& json_path) {
  auto client = Connect(flags);
  if (!client.ok()) return Fail(client.status());
  auto table = MeasureKernels(client->get(), options);
  if (!table.ok()) return Fail(table.status());
  std::fputs(FormatKernelTableMarkdown(*table, flags.servers).c_str(), stdout);
  if (!json_path.empty()) {
    absl::Status s = WriteTextFile(json_path, FormatKernelTableJson(*table));
    if (!s.ok()) return Fail(s);
  }
  return AllKernelsPassed(*table) ? 0 : 2;
}

}  // namespace

int RunClientMain(int argc, char** argv) {
  gemm::TuneProcess();
  CLI::App app{"gemm-client: submits GEMMs to a gemm-server"};
  app.set_version_flag("--version", std::string(gemm::kVersion));
  app.require_subcommand(1);
  ConnectionFlags common;
  auto add_common = [&common](CLI::App* sub) {
    AddConnectionFlags(sub, &common);
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

}  // namespace gemm::client
