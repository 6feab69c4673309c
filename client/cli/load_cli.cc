#include "client/cli/load_cli.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli/cli_flags.h"
#include "client/cli/load_command.h"
#include "client/cli/load_report.h"
#include "client/cli/load_verdict.h"
#include "client/cli/shape_mix.h"
#include "client/cli/text_file.h"
#include "client/lib/job_region.h"

namespace gemm::client {
namespace {

constexpr size_t kMaxSweepSteps = 100;
// The largest concurrency a sweep may ask for.
constexpr double kMaxSweepConcurrency = 1 << 20;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "gemm-client: %s\n", status.ToString().c_str());
  return 1;
}

absl::StatusOr<LoadCommandOptions> CommandOf(const LoadFlags& l,
                                             bool rate_cap) {
  LoadCommandOptions command;
  LoadOptions& options = command.load;
  auto shapes = ParseShapeMix(l.shapes);
  if (!shapes.ok()) return shapes.status();
  options.shapes = *shapes;
  options.kernel = l.kernel;
  options.check = l.check;
  options.precision = l.precision;
  auto memory = OperandMemoryNamed(l.memory);
  if (!memory.ok()) return memory.status();
  options.memory = *memory;
  options.rate = l.rate;
  // In rate mode the concurrency caps jobs outstanding only when given.
  options.concurrency = l.rate > 0 && !rate_cap ? 0 : l.concurrency;
  options.poisson = l.arrivals == "poisson";
  options.duration = absl::Seconds(l.duration_s);
  options.count = l.count;
  options.warmup = absl::Seconds(l.warmup_s);
  options.job_timeout_ms = l.job_timeout_ms;
  options.streams_per_connection = l.streams_per_connection;
  options.unary_share = l.unary_share;
  options.verify_every = l.verify_every;
  options.seed = l.seed;
  command.json_path = l.json_path;
  command.csv_path = l.csv_path;
  command.plot_prefix = l.plot_prefix;
  return command;
}

// Says each failure on stderr; returns the verdict's exit status.
int Judge(const LoadReport& report, bool allow_errors,
          const std::string& step) {
  const LoadVerdict verdict = JudgeLoad(report, allow_errors);
  for (const std::string& why : verdict.failures) {
    std::fprintf(stderr, "gemm-client: load %sFAILED: %s\n", step.c_str(),
                 why.c_str());
  }
  return verdict.exit_code;
}

int RunOnce(GemmClient* client, const LoadFlags& l,
            LoadCommandOptions command) {
  const bool tty = isatty(STDERR_FILENO);
  if (!l.quiet) {
    command.load.on_progress = [tty](const LoadProgress& p) {
      std::fputs(FormatProgressLine(p, tty).c_str(), stderr);
      std::fflush(stderr);
    };
  }
  auto report = RunLoad(client, command.load);
  if (!l.quiet && tty) std::fprintf(stderr, "\n");
  if (!report.ok()) return Fail(report.status());
  std::fputs(FormatReportText(*report).c_str(), stdout);
  std::fflush(stdout);
  absl::Status written = WriteLoadReportFiles(command, *report);
  if (written.ok()) written = PlotLoadReport(command, *report);
  if (!written.ok()) return Fail(written);
  return Judge(*report, l.allow_errors, "");
}

int RunSweep(GemmClient* client, const LoadFlags& l,
             const LoadCommandOptions& base, bool by_rate,
             const std::vector<double>& steps) {
  const char* what = by_rate ? "rate/s" : "concurrency";
  std::printf("%12s %12s %10s %10s %10s %10s %10s %8s %8s\n", what, "jobs/s",
              "GFLOP/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "errors",
              "verdict");
  std::vector<std::string> json_steps, csv_rows;
  std::string csv_header;
  int status = 0;
  for (double step : steps) {
    LoadCommandOptions command = base;
    if (by_rate) {
      command.load.rate = step;
    } else {
      command.load.concurrency = static_cast<int>(step);
      command.load.rate = 0;
    }
    auto report = RunLoad(client, command.load);
    if (!report.ok()) {
      const int failed = Fail(report.status());
      if (status == 0) status = failed;
      break;  // the steps made so far are still written
    }
    const std::string label =
        by_rate ? absl::StrFormat("%g", step) : absl::StrFormat("%.0f", step);
    const int step_status =
        Judge(*report, l.allow_errors, absl::StrCat(what, " ", label, " "));
    // A wrong result (2) outranks failed jobs (4), as in JudgeLoad.
    if ((status == 0 || step_status == kLoadWrongResults) &&
        status != kLoadWrongResults) {
      status = step_status;
    }
    const Distribution& d = report->latency_ms;
    std::printf("%12s %12.1f %10.2f %10.3f %10.3f %10.3f %10.3f %8llu %8s\n",
                label.c_str(), report->requests_per_s, report->gflops, d.p50,
                d.p90, d.p99, d.p999,
                static_cast<unsigned long long>(report->errors),
                step_status == 0 ? "ok" : "FAILED");
    std::fflush(stdout);
    json_steps.push_back(FormatReportJson(*report));
    const std::string csv = FormatReportCsv(*report);
    csv_header = csv.substr(0, csv.find('\n') + 1);
    csv_rows.push_back(csv.substr(csv.find('\n') + 1));
    if (!l.plot_prefix.empty()) {
      LoadCommandOptions plot = command;
      plot.plot_prefix = absl::StrCat(l.plot_prefix, "-", label);
      absl::Status s = PlotLoadReport(plot, *report);
      if (!s.ok()) return Fail(s);
    }
  }
  const std::string json_path = JsonReportPath(base);
  if (!json_path.empty() && !json_steps.empty()) {
    absl::Status s = WriteTextFile(
        json_path,
        absl::StrCat("{\"sweep\": \"", by_rate ? "rate" : "concurrency",
                     "\", \"steps\": [", absl::StrJoin(json_steps, ","),
                     "]}\n"));
    if (!s.ok()) return Fail(s);
  }
  if (!l.csv_path.empty() && !csv_rows.empty()) {
    absl::Status s = WriteTextFile(
        l.csv_path, absl::StrCat(csv_header, absl::StrJoin(csv_rows, "")));
    if (!s.ok()) return Fail(s);
  }
  return status;
}

}  // namespace

absl::StatusOr<std::vector<double>> ParseSweepRange(absl::string_view flag,
                                                    absl::string_view range,
                                                    bool integers) {
  const std::vector<std::string> parts = absl::StrSplit(range, ':');
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " \"", range, "\": ", why, " (START:END[:STEP], e.g. ",
        integers ? "1:64:8" : "100:1000:100", ")"));
  };
  if (parts.size() < 2 || parts.size() > 3) return bad("not START:END[:STEP]");
  double v[3] = {0, 0, 0};
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!absl::SimpleAtod(parts[i], &v[i]) || !std::isfinite(v[i])) {
      return bad(absl::StrCat("\"", parts[i], "\" is not a number"));
    }
    if (integers && v[i] != std::floor(v[i])) {
      return bad(absl::StrCat("\"", parts[i], "\" is not a whole number"));
    }
  }
  const double start = v[0], end = v[1];
  const double step = parts.size() == 3 ? v[2] : (integers ? 1 : start);
  if (start <= 0 || step <= 0) return bad("START and STEP must be positive");
  if (end < start) return bad("END is below START");
  if (integers && end > kMaxSweepConcurrency) {
    return bad(absl::StrCat("over ", kMaxSweepConcurrency));
  }
  // Steps START + i * STEP below END (a hair of slack for rounding), then
  // END: no sum of steps, so 0.1:0.7:0.1 gives 0.3, not 0.30000000000000004.
  const double span = (end - start) / step;
  const size_t whole = static_cast<size_t>(std::floor(span + 1e-9));
  if (whole + 1 > kMaxSweepSteps + (span - whole < 1e-9 ? 1 : 0)) {
    return bad(absl::StrCat("over ", kMaxSweepSteps, " steps"));
  }
  std::vector<double> steps;
  for (size_t i = 0; i <= whole; ++i) {
    const double x = start + static_cast<double>(i) * step;
    if (x < end - 1e-9 * std::max(1.0, end)) steps.push_back(x);
  }
  steps.push_back(end);
  if (steps.size() > kMaxSweepSteps) {
    return bad(absl::StrCat("over ", kMaxSweepSteps, " steps"));
  }
  return steps;
}

CLI::Option* AddLoadFlags(CLI::App* load, LoadFlags* f) {
  load->add_option("--shapes", f->shapes,
                   "shape mix MxNxK[:weight],... e.g. "
                   "128x128x128:0.7,1024x1024x1024:0.3")
      ->capture_default_str();
  load->add_option("--kernel", f->kernel, "auto or a kernel from `info`")
      ->capture_default_str();
  load->add_option("--check", f->check, kCheckHelp)
      ->transform(CLI::CheckedTransformer(kCheckModes, CLI::ignore_case))
      ->default_str("default");
  load->add_option("--memory", f->memory, kMemoryHelp)
      ->check(CLI::IsMember(kMemoryModes))
      ->capture_default_str();
  load->add_flag_callback(
      "--shm", [f] { f->memory = "shm"; }, "--memory shm");
  load->add_flag_callback(
      "--cuda-ipc", [f] { f->memory = "cuda-ipc"; }, "--memory cuda-ipc");
  load->add_option("--precision", f->precision, kPrecisionHelp)
      ->transform(CLI::CheckedTransformer(kPrecisions, CLI::ignore_case))
      ->default_str("fp32");
  CLI::Option* concurrency =
      load->add_option("-c,--concurrency", f->concurrency,
                       "jobs outstanding (closed loop); with --rate, a cap "
                       "on jobs outstanding when given")
          ->capture_default_str();
  load->add_option("-r,--rate", f->rate,
                   "jobs started per second (open loop); 0: concurrency mode")
      ->capture_default_str();
  load->add_option("--arrivals", f->arrivals,
                   "gaps between starts in rate mode")
      ->check(CLI::IsMember({"constant", "poisson"}))
      ->capture_default_str();
  CLI::Option* by_concurrency =
      load->add_option("--concurrency-range", f->concurrency_range,
                       "sweep: one run per concurrency START:END[:STEP] "
                       "(STEP default 1), a line each");
  load->add_option("--rate-range", f->rate_range,
                   "sweep: one run per rate START:END[:STEP] (STEP default "
                   "START), a line each")
      ->excludes(by_concurrency);
  // -n is N (the matrix dimension) in `run` and `kernels`: here the count
  // has its long name only.
  load->add_option("-d,--duration-s", f->duration_s,
                   "length of the measured part (unless --count)")
      ->capture_default_str();
  load->add_option("--count", f->count,
                   "jobs in the measured part (0: use --duration-s)")
      ->capture_default_str();
  load->add_option("--warmup-s", f->warmup_s, "warm-up left out of the figures")
      ->capture_default_str();
  load->add_option("--streams-per-connection", f->streams_per_connection,
                   "GemmStream calls per connection; jobs are spread over "
                   "all of them")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  load->add_option("--unary-share", f->unary_share,
                   "share of the jobs sent each on a call of its own (unary "
                   "Gemm; GemmStream in chunks over 3 MiB) instead of on the "
                   "streams")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  load->add_option("--job-timeout-ms", f->job_timeout_ms,
                   "server-side budget of each job (0: none)");
  load->add_option("--verify-every", f->verify_every,
                   "check every Nth result against a float64 reference "
                   "(0: never)")
      ->capture_default_str();
  load->add_option("--seed", f->seed)->capture_default_str();
  load->add_option("--json", f->json_path,
                   "write the report as JSON (a sweep: {\"steps\": [...]})");
  load->add_option("--csv", f->csv_path,
                   "write the summary as CSV (header and a row per run)");
  load->add_option("--plot", f->plot_prefix,
                   "write the charts PREFIX-latency.svg and "
                   "PREFIX-throughput.svg (a sweep: PREFIX-STEP-...)");
  load->add_flag("--allow-errors", f->allow_errors,
                 "exit 0 even when jobs failed (still non-zero when none "
                 "succeeded, a job was lost or a result was wrong)");
  load->add_flag("-q,--quiet", f->quiet, "no progress line");
  return concurrency;
}

int RunLoadCommand(GemmClient* client, const LoadFlags& l, bool rate_cap) {
  auto command = CommandOf(l, rate_cap);
  if (!command.ok()) return Fail(command.status());
  if (l.concurrency_range.empty() && l.rate_range.empty()) {
    return RunOnce(client, l, *std::move(command));
  }
  const bool by_rate = !l.rate_range.empty();
  auto steps = by_rate ? ParseSweepRange("--rate-range", l.rate_range, false)
                       : ParseSweepRange("--concurrency-range",
                                         l.concurrency_range, true);
  if (!steps.ok()) return Fail(steps.status());
  if (by_rate && !rate_cap) command->load.concurrency = 0;
  return RunSweep(client, l, *command, by_rate, *steps);
}

}  // namespace gemm::client
