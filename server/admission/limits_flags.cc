#include "server/admission/limits_flags.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/cli_options.h"

namespace gemm::server {

void AddServiceLimitsFlags(CLI::App& app, ServiceLimits* limits) {
  const std::string group = "Job limits";
  app.add_option("--max-dim", limits->max_dim, "largest M, N or K")
      ->capture_default_str()
      ->group(group);
  app.add_option("--max-job-bytes", limits->max_job_bytes,
                 "largest job: bytes of A, B and C together")
      ->capture_default_str()
      ->group(group);
  app.add_option("--max-inflight-bytes", limits->max_inflight_bytes,
                 "bytes of all accepted, unfinished jobs; beyond it new jobs "
                 "get UNAVAILABLE")
      ->capture_default_str()
      ->group(group);
  app.add_option("--client-inflight-share", limits->client_inflight_share,
                 "part of --max-inflight-bytes one client (address) may hold "
                 "(1: no per-client limit)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str()
      ->group(group);
  app.add_option("--max-client-jobs", limits->max_client_jobs,
                 "jobs one client may hold, declared and not yet answered, "
                 "and as many answers not yet sent, plus 64 (0: no limit)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--max-open-jobs-per-stream", limits->max_open_jobs_per_stream,
                 "jobs of one stream being received at once (0: no limit)")
      ->capture_default_str()
      ->group(group);
  app.add_option_function<double>(
         "--check-min-gflop",
         [limits](const double& gflop) {
           limits->check_min_flops = gflop * 1e9;
         },
         "check the result (ABFT row and column checksums; a result that "
         "fails is re-run, never returned) of every job of at least this "
         "many GFLOP (2*M*N*K/1e9) that does not opt out with "
         "params.check; 0: only jobs that ask")
      ->check(CLI::NonNegativeNumber)
      ->default_str(absl::StrCat(limits->check_min_flops / 1e9))
      ->group(group);
  app.add_option("--max-message-bytes", limits->max_message_bytes,
                 "largest gRPC message received or sent (a unary result "
                 "included)")
      ->capture_default_str()
      ->group(group);
  AddSecondsOption(app, "--job-stall-timeout-s", &limits->job_stall_timeout,
                   "a streamed job that gets no data for this long fails "
                   "with DEADLINE_EXCEEDED and gives back its budget (0: "
                   "never)")
      ->group(group);
  app.add_option("--result-chunk-bytes", limits->result_chunk_bytes,
                 "size of result chunks on GemmStream; at most "
                 "--max-message-bytes less 1024 (a result message's header)")
      ->capture_default_str()
      ->group(group);
}

}  // namespace gemm::server
