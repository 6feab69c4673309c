// LoadRun's parts (load_run.h), shared by load_run.cc (the dispatchers)
// and load_run_report.cc (progress and the report): a shape of the mix and
// a dispatcher thread's state.
//
// Thread-safety: as each struct says.
#ifndef GEMM_CLIENT_CLI_LOAD_RUN_PARTS_H_
#define GEMM_CLIENT_CLI_LOAD_RUN_PARTS_H_

#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "client/cli/load_run.h"
#include "client/cli/load_summary.h"
#include "client/cli/shape_operands.h"

namespace gemm::client {

// One shape of the mix: its operands and answer, and its share of the jobs.
struct LoadRun::ShapeData {
  ShapeOperands operands;
  double weight = 1.0;
  // Where its shared A and B are, with a region.
  RegionOffset a_region;
  RegionOffset b_region;
};

// One dispatcher thread and what it owns: every n-th stream, its RNG, its
// share of the concurrency cap and of the rate, and the records of its jobs.
// Completions of its jobs take only its lock, so dispatchers do not contend
// with each other.
struct LoadRun::Dispatcher {
  // Whether another job may start under this dispatcher's cap.
  bool BelowCap() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return cap == 0 || in_flight < cap;
  }
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return in_flight == 0; }

  int index = 0;
  std::vector<int> slots;  // indices into LoadRun::streams_
  uint64_t next_slot = 0;
  uint64_t cap = 0;  // jobs outstanding at once; 0 = no cap
  double rate = 0;   // jobs started per second; 0 = closed loop
  std::mt19937_64 random;
  std::discrete_distribution<int> pick_shape;
  std::bernoulli_distribution pick_own_call;  // LoadOptions.unary_share
  // Streams that broke and were replaced; finished at the end, since a
  // stream cannot be destroyed from its own callbacks.
  std::vector<std::unique_ptr<JobStream>> broken_streams;
  uint64_t stream_restarts = 0;
  std::thread thread;

  mutable absl::Mutex mu;
  // Per-job buffers: C (LoadRun::out_floats_), then the scratch of the
  // job's own operands (LoadRun::scratch_floats_).
  std::vector<std::unique_ptr<float[]>> free_buffers ABSL_GUARDED_BY(mu);
  std::vector<JobRecord> records ABSL_GUARDED_BY(mu);
  uint64_t sent_by_call[kCalls] ABSL_GUARDED_BY(mu) = {};
  uint64_t in_flight ABSL_GUARDED_BY(mu) = 0;
  uint64_t completed ABSL_GUARDED_BY(mu) = 0;
  uint64_t errors ABSL_GUARDED_BY(mu) = 0;
  uint64_t verified ABSL_GUARDED_BY(mu) = 0;
  uint64_t verify_failures ABSL_GUARDED_BY(mu) = 0;
  std::vector<double> last_second_ms ABSL_GUARDED_BY(mu);
  std::map<absl::StatusCode, std::string> error_sample ABSL_GUARDED_BY(mu);
};

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_LOAD_RUN_PARTS_H_
