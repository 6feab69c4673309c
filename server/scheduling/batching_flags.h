// The flags of the batch scheduler (--max-batch-size, --workers, ...),
// bound to a BatchScheduler::Options whose values are their defaults.
//
// Thread-safety: call while building the command line, on one thread.
//
//   BatchScheduler::Options batching;
//   AddBatchingFlags(app, &batching);  // before app.parse()
#ifndef GEMM_SERVER_SCHEDULING_BATCHING_FLAGS_H_
#define GEMM_SERVER_SCHEDULING_BATCHING_FLAGS_H_

#include "CLI/CLI.hpp"
#include "server/scheduling/batch_scheduler.h"

namespace gemm::server {

// `options` must outlive the parse.
void AddBatchingFlags(CLI::App& app, BatchScheduler::Options* options);

}  // namespace gemm::server

#endif  // GEMM_SERVER_SCHEDULING_BATCHING_FLAGS_H_
