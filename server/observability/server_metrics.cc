#include "server/observability/server_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/time.h"

namespace gemm::server {
namespace {

// 50 us to 60 s: a 64^3 job's queue wait to an 8192^3 job's whole time.
std::vector<double> SecondsBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
          0.01,    0.025,  0.05,    0.1,    0.25,  0.5,    1,
          2.5,     5,      10,      30,     60};
}

std::vector<double> BatchSizeBuckets() {
  return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
}

std::string CodeLabel(absl::StatusCode code) {
  return absl::StatusCodeToString(code);
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// Fields of /proc/self/stat after the command name (field 3 onwards), or
// empty when it cannot be read.
std::vector<std::string> ProcStatFields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return {};
  // The command name, in parentheses, may hold spaces; the rest cannot.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return {};
  return absl::StrSplit(line.substr(close + 2), ' ');
}

double BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime") {
      in >> value;
      return value;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

double OpenDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  double n = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n - 1;  // the directory's own descriptor
}

// Field n (1-based, as in proc(5)) of /proc/self/stat as a number.
double StatField(const std::vector<std::string>& fields, size_t n) {
  // fields[0] is field 3 (state).
  if (n < 3 || n - 3 >= fields.size()) return 0;
  return std::strtod(fields[n - 3].c_str(), nullptr);
}

}  // namespace

ServerMetrics::ServerMetrics()
    : jobs_(registry_.AddCounter(
          "gemm_jobs_total",
          "GEMM jobs answered, by outcome: ok (result delivered), failed "
          "(accepted, then an error or the call ended first), rejected (turned "
          "away before acceptance); with the status code, the kernel that ran "
          "or would have run, and the device",
          {"outcome", "code", "kernel", "device"})),
      queue_seconds_(registry_.AddHistogram(
          "gemm_job_queue_seconds",
          "Delivered jobs: time from complete on the server to the start of "
          "their batch",
          {"device"}, SecondsBuckets())),
      h2d_seconds_(registry_.AddHistogram(
          "gemm_job_h2d_seconds",
          "Delivered jobs: host-to-device copy time of their batch (0 on the "
          "CPU)",
          {"device"}, SecondsBuckets())),
      compute_seconds_(registry_.AddHistogram(
          "gemm_job_compute_seconds",
          "Delivered jobs: compute time of their batch, by kernel",
          {"device", "kernel"}, SecondsBuckets())),
      d2h_seconds_(registry_.AddHistogram(
          "gemm_job_d2h_seconds",
          "Delivered jobs: device-to-host copy time of their batch (0 on the "
          "CPU)",
          {"device"}, SecondsBuckets())),
      server_seconds_(registry_.AddHistogram(
          "gemm_job_server_seconds",
          "Delivered jobs: time from complete on the server to their result "
          "computed (queue, copies and compute)",
          {"device"}, SecondsBuckets())),
      check_seconds_(registry_.AddHistogram(
          "gemm_job_check_seconds",
          "Delivered jobs whose result was checked (ABFT): time of the check, "
          "over every run",
          {"device"}, SecondsBuckets())),
      checked_jobs_(registry_.AddCounter(
          "gemm_checked_jobs_total",
          "Delivered jobs whose result was checked (ABFT), by device and "
          "result: passed (first run), recovered (a re-run replaced a result "
          "that failed)",
          {"device", "result"})),
      batch_size_(registry_.AddHistogram("gemm_batch_size",
                                         "Jobs per batch the executor ran",
                                         {"device"}, BatchSizeBuckets())),
      batches_(registry_.AddCounter(
          "gemm_batches_total",
          "Batches the executor ran, by device, kernel and outcome",
          {"device", "kernel", "outcome"})),
      received_bytes_(
          registry_
              .AddCounter("gemm_received_bytes_total",
                          "Bytes of gemm.v1 request messages received")
              .With({})),
      sent_bytes_(registry_
                      .AddCounter("gemm_sent_bytes_total",
                                  "Bytes of gemm.v1 response messages sent")
                      .With({})) {}

JobLabels JobLabels::Of(const GemmJob& job) {
  JobLabels labels;
  if (job.kernel().valid()) labels.kernel = std::string(job.kernel().name());
  if (job.timing().check.rerun_kernel.valid()) {
    labels.kernel = std::string(job.timing().check.rerun_kernel.name());
  }
  const std::string& device = job.timing().device;
  if (!device.empty()) labels.device = device.substr(0, device.find(' '));
  return labels;
}

void ServerMetrics::JobRejected(absl::StatusCode code) {
  jobs_.With({"rejected", CodeLabel(code), "none", "none"}).Increment();
}

void ServerMetrics::JobDelivered(const GemmJob& job) {
  const JobLabels labels = JobLabels::Of(job);
  const std::string& device = labels.device;
  const JobTiming& t = job.timing();
  jobs_.With({"ok", CodeLabel(absl::StatusCode::kOk), labels.kernel, device})
      .Increment();
  queue_seconds_.With({device}).Observe(Seconds(t.queued));
  h2d_seconds_.With({device}).Observe(Seconds(t.h2d));
  compute_seconds_.With({device, labels.kernel}).Observe(Seconds(t.compute));
  d2h_seconds_.With({device}).Observe(Seconds(t.d2h));
  server_seconds_.With({device}).Observe(Seconds(t.server));
  if (t.check.ran) {
    check_seconds_.With({device}).Observe(Seconds(t.check.time));
    checked_jobs_
        .With({device, t.check.mismatches == 0 ? "passed" : "recovered"})
        .Increment();
  }
}

void ServerMetrics::JobFailed(absl::StatusCode code, const JobLabels& job) {
  jobs_.With({"failed", CodeLabel(code), job.kernel, job.device}).Increment();
}

void ServerMetrics::BatchRan(const GemmJob& first, size_t jobs,
                             const absl::Status& status) {
  const JobLabels labels = JobLabels::Of(first);
  batch_size_.With({labels.device}).Observe(static_cast<double>(jobs));
  batches_.With({labels.device, labels.kernel, status.ok() ? "ok" : "failed"})
      .Increment();
}

void AddProcessMetrics(MetricsRegistry& registry) {
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  registry.AddSampledCounter(
      "process_cpu_seconds_total", "User and system CPU time of the process",
      {}, [ticks]() -> std::vector<Sample> {
        const auto fields = ProcStatFields();
        return {{{}, (StatField(fields, 14) + StatField(fields, 15)) / ticks}};
      });
  registry.AddGauge("process_resident_memory_bytes",
                    "Resident memory of the process", {},
                    [page]() -> std::vector<Sample> {
                      return {{{}, StatField(ProcStatFields(), 24) * page}};
                    });
  registry.AddGauge("process_virtual_memory_bytes",
                    "Virtual memory of the process", {},
                    []() -> std::vector<Sample> {
                      return {{{}, StatField(ProcStatFields(), 23)}};
                    });
  registry.AddGauge("process_open_fds", "Open file descriptors", {},
                    []() -> std::vector<Sample> {
                      return {{{}, OpenDescriptors()}};
                    });
  registry.AddGauge("process_max_fds",
                    "The open-file limit (soft) of the process", {},
                    []() -> std::vector<Sample> {
                      rlimit limit{};
                      getrlimit(RLIMIT_NOFILE, &limit);
                      return {{{}, static_cast<double>(limit.rlim_cur)}};
                    });
  const double start =
      BootTimeSeconds() + StatField(ProcStatFields(), 22) / ticks;
  registry.AddGauge("process_start_time_seconds",
                    "Start time of the process since the Unix epoch", {},
                    [start]() -> std::vector<Sample> {
                      return {{{}, start}};
                    });
}

}  // namespace gemm::server
