#include "client/lib/split_job.h"

#include <algorithm>

namespace gemm::client {

bool CanSplitRows(const GemmArgs& args, int parts) {
  // Region offsets are not cut into blocks: such jobs go whole.
  return parts > 1 && !args.problem.trans_a && !args.a_region.used() &&
         !args.c_region.used() && !args.result_region.used() &&
         args.problem.m >= static_cast<uint32_t>(parts);
}

std::vector<RowBlock> SplitRows(const GemmArgs& args, float* c_out, int parts) {
  std::vector<RowBlock> blocks;
  const uint64_t m = args.problem.m;
  for (int i = 0; i < parts; ++i) {
    const uint64_t row = m * i / parts;
    const uint64_t rows = m * (i + 1) / parts - row;
    RowBlock block;
    block.args = args;
    block.args.problem.m = static_cast<uint32_t>(rows);
    block.args.a = args.a + row * args.problem.k;  // rows of A (not transposed)
    if (args.c != nullptr) block.args.c = args.c + row * args.problem.n;
    block.c_out = c_out + row * args.problem.n;
    blocks.push_back(block);
  }
  return blocks;
}

SplitResult::SplitResult(const GemmProblem& whole, int parts, GemmCallback done)
    : flops_(whole.flops()), remaining_(parts), done_(std::move(done)) {}

void SplitResult::PartDone(absl::StatusOr<v1::Timing> result) {
  GemmCallback done;
  absl::StatusOr<v1::Timing> merged;
  {
    absl::MutexLock lock(&mu_);
    v1::Timing& t = timing_;
    if (!result.ok()) {
      if (error_.ok()) error_ = result.status();
    } else {
      // Device work adds up; waiting and server time overlap, so the
      // longest part's count.
      t.set_queue_ms(std::max(t.queue_ms(), result->queue_ms()));
      t.set_server_ms(std::max(t.server_ms(), result->server_ms()));
      t.set_h2d_ms(t.h2d_ms() + result->h2d_ms());
      t.set_compute_ms(t.compute_ms() + result->compute_ms());
      t.set_d2h_ms(t.d2h_ms() + result->d2h_ms());
      t.set_batch_size(std::max(t.batch_size(), result->batch_size()));
      if (t.kernel().empty()) t.set_kernel(result->kernel());
      if (t.device().empty()) t.set_device(result->device());
    }
    if (--remaining_ > 0) return;
    if (!error_.ok()) {
      merged = error_;
    } else {
      if (t.compute_ms() > 0) t.set_gflops(flops_ / (t.compute_ms() * 1e6));
      merged = t;
    }
    done = std::move(done_);
  }
  done(std::move(merged));
}

}  // namespace gemm::client
