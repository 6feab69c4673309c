// LoadRun: one run of the load test behind RunLoad() (load_generator.h):
// the operands of each shape, one JobStream per channel (times
// streams_per_connection), the dispatcher threads that start jobs on them
// (closed loop or at a rate), the record of every ended job, the progress
// callback, and the LoadReport summarised from the records.
//
// Thread-safety: Run() is called once, from one thread; it starts and joins
// the dispatcher threads and the progress thread itself.
//
//   LoadRun run(client, options);
//   LoadReport report = run.Run();
//   std::cout << FormatReportText(report);
#ifndef GEMM_CLIENT_CLI_LOAD_RUN_H_
#define GEMM_CLIENT_CLI_LOAD_RUN_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/cli/load_generator.h"
#include "client/cli/load_report.h"
#include "client/lib/gemm_client.h"
#include "client/lib/job_region.h"

namespace gemm::client {

class LoadRun {
 public:
  using Clock = std::chrono::steady_clock;

  // `region` (may be null) holds operands and results when
  // options.memory says so; it must outlive the run.
  LoadRun(GemmClient* client, const LoadOptions& options,
          JobRegion* region = nullptr);
  // The bytes a region for `options` needs (shapes' A and B, and
  // ResultSlots() results of the largest shape).
  static uint64_t RegionBytes(const LoadOptions& options);
  // Results that land in the region at once.
  static uint64_t ResultSlots(const LoadOptions& options);
  ~LoadRun();

  // Runs the dispatchers until the count or the duration is reached and
  // summarises what they recorded. Call once.
  LoadReport Run();

 private:
  struct ShapeData;
  struct Dispatcher;
  // The call a job goes on; the keys of LoadReport.sent_by_call.
  enum Call { kStream, kUnary, kOwnStream, kSplit, kCalls };

  void Prepare();
  int TargetIndex(const std::string& target) const;
  void DispatchLoop(Dispatcher* d, Clock::time_point warmup_end,
                    Clock::time_point stop_at);
  void Dispatch(Dispatcher* d, Clock::time_point scheduled, bool measured);
  void OnEnd(Dispatcher* d, int shape, int target, float* out, uint64_t seq,
             int64_t result_slot, Clock::time_point start, bool measured,
             absl::StatusOr<v1::Timing> result);

  void ReportProgress(Clock::time_point start, Clock::time_point warmup_end);
  LoadReport ReportOf(Clock::time_point measure_start) const;

  GemmClient* const client_;
  const LoadOptions options_;
  JobRegion* const region_;
  RegionSlots result_slots_;
  std::vector<ShapeData> shapes_;
  std::vector<double> shape_weights_;
  std::vector<std::string> targets_;  // distinct addresses
  size_t out_floats_ = 0;      // of a job's buffer: C, the largest shape's
  size_t scratch_floats_ = 0;  // and then its own operands' scratch

  // Streams, one per channel; slot i is touched only by the dispatcher that
  // owns it (i % dispatchers_.size()).
  std::vector<std::unique_ptr<JobStream>> streams_;
  std::vector<int> stream_target_;
  std::vector<std::unique_ptr<Dispatcher>> dispatchers_;

  // Shared by the dispatchers; exact because each is one atomic step.
  std::atomic<uint64_t> sent_{0};              // jobs started, warm-up included
  std::atomic<uint64_t> warmup_jobs_{0};       // of them, in the warm-up
  std::atomic<uint64_t> measured_claimed_{0};  // --count: measured starts
  std::atomic<uint64_t> server_side_jobs_{0};  // split jobs count their parts
};

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_LOAD_RUN_H_
