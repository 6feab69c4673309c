#include "server/scheduling/batching_flags.h"

#include "common/cli_options.h"

namespace gemm::server {

void AddBatchingFlags(CLI::App& app, BatchScheduler::Options* options) {
  const std::string group = "Batching";
  app.add_option("--max-queued-jobs", options->max_queued_jobs,
                 "jobs that may wait, three quarters of them at most one "
                 "client's; beyond that new jobs get UNAVAILABLE")
      ->capture_default_str()
      ->group(group);
  app.add_option("--max-batch-size", options->max_batch_size,
                 "most jobs in one batch")
      ->capture_default_str()
      ->group(group);
  AddMicrosecondsOption(app, "--max-queue-delay-us", &options->max_queue_delay,
                        "longest a job waits for others to join its batch")
      ->group(group);
  app.add_option("--workers", options->num_workers,
                 "batches executing at once; 0: the backend's choice (2 on "
                 "the CPU, one of them for light jobs only; devices x "
                 "streams-per-device on CUDA)")
      ->capture_default_str()
      ->group(group);
}

}  // namespace gemm::server
