#include "server/core/wire_timing.h"

#include <string>

#include "absl/time/time.h"

namespace gemm::server {
namespace {

double ToMs(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

}  // namespace

void FillTiming(const GemmJob& job, v1::Timing* timing) {
  const JobTiming& t = job.timing();
  timing->set_queue_ms(ToMs(t.queued));
  timing->set_batch_size(t.batch_size);
  timing->set_h2d_ms(ToMs(t.h2d));
  timing->set_compute_ms(ToMs(t.compute));
  timing->set_d2h_ms(ToMs(t.d2h));
  timing->set_server_ms(ToMs(t.server));
  timing->set_kernel(std::string(t.check.rerun_kernel.valid()
                                     ? t.check.rerun_kernel.name()
                                     : job.kernel().name()));
  timing->set_device(t.device);
  timing->set_precision(std::string(PrecisionName(t.precision)));
  if (t.check.ran) {
    v1::CheckRecord* check = timing->mutable_check();
    check->set_ran(true);
    check->set_ms(ToMs(t.check.time));
    check->set_mismatches(t.check.mismatches);
    check->set_worst_ratio(t.check.worst_ratio);
    check->set_unchecked_lines(t.check.unchecked_lines);
    check->set_detail(t.check.detail);
  }
  // For a batched launch, compute covers the whole batch and the batch's
  // rate is batch_size times this figure.
  const double seconds = absl::ToDoubleSeconds(t.compute);
  timing->set_gflops(seconds > 0 ? job.problem().flops() / seconds / 1e9 : 0.0);
}

}  // namespace gemm::server
