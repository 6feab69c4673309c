#include "client/cli/load_run.h"

#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "client/cli/load_run_parts.h"
#include "client/cli/shape_operands.h"
#include "common/precision.h"

namespace gemm::client {
namespace {

using Clock = LoadRun::Clock;

double Millis(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

LoadRun::LoadRun(GemmClient* client, const LoadOptions& options,
                 JobRegion* region)
    : client_(client), options_(options), region_(region) {}

uint64_t LoadRun::ResultSlots(const LoadOptions& options) {
  return options.concurrency > 0 ? options.concurrency : 256;
}

uint64_t LoadRun::RegionBytes(const LoadOptions& options) {
  uint64_t bytes = 0, largest_c = 0;
  for (const WeightedShape& shape : options.shapes) {
    bytes +=
        4 * (shape.problem.a_elements() + shape.problem.b_elements()) + 2 * 256;
    largest_c = std::max(largest_c, shape.problem.c_elements());
  }
  return bytes + ResultSlots(options) * (4 * largest_c + 256);
}

LoadRun::~LoadRun() = default;

void LoadRun::Prepare() {
  uint64_t seed = options_.seed;
  for (const WeightedShape& shape : options_.shapes) {
    ShapeData data{
        ShapeOperands::Create(shape.problem, seed, options_.verify_every > 0),
        shape.weight};
    seed += 2;  // A's and B's
    out_floats_ = std::max<size_t>(out_floats_, shape.problem.c_elements());
    scratch_floats_ =
        std::max<size_t>(scratch_floats_, data.operands.scratch_floats());
    shape_weights_.push_back(shape.weight);
    shapes_.push_back(std::move(data));
  }
  if (region_ != nullptr) {
    // Each shape's A and B once; then the result slots. RegionBytes() sized
    // the region for exactly this (a shape that does not fit travels in the
    // messages).
    for (ShapeData& shape : shapes_) {
      const GemmArgs args = shape.operands.SharedArgs();
      absl::StatusOr<RegionOffset> a =
          region_->Place(args.a, 4 * args.problem.a_elements());
      absl::StatusOr<RegionOffset> b =
          region_->Place(args.b, 4 * args.problem.b_elements());
      if (a.ok() && b.ok()) {
        shape.a_region = *a;
        shape.b_region = *b;
      }
    }
    result_slots_.Reserve(region_, ResultSlots(options_), 4 * out_floats_);
  }
  for (const std::string& target : client_->channel_targets()) {
    if (std::find(targets_.begin(), targets_.end(), target) == targets_.end()) {
      targets_.push_back(target);
    }
  }
  // OpenStream() rotates over the channels, so stream i is on channel
  // i % channels.
  const size_t channels = client_->channel_targets().size() *
                          std::max(options_.streams_per_connection, 1);
  for (size_t i = 0; i < channels; ++i) {
    streams_.push_back(client_->OpenStream());
    stream_target_.push_back(TargetIndex(streams_.back()->target()));
  }

  // One dispatcher per stream, but never more than the cap allows jobs (a
  // dispatcher with a cap share of 0 could send nothing); a dispatcher then
  // owns several streams and rotates over them.
  const uint64_t cap = options_.concurrency > 0 ? options_.concurrency : 0;
  const size_t count =
      cap > 0 ? std::min<size_t>(channels, cap) : std::max<size_t>(channels, 1);
  for (size_t i = 0; i < count; ++i) {
    auto d = std::make_unique<Dispatcher>();
    d->index = static_cast<int>(i);
    for (size_t slot = i; slot < channels; slot += count) {
      d->slots.push_back(static_cast<int>(slot));
    }
    // Split evenly; the first cap % count dispatchers take one more.
    if (cap > 0) d->cap = cap / count + (i < cap % count ? 1 : 0);
    d->rate = options_.rate / count;
    // Dispatcher 0 draws exactly what the single dispatcher used to.
    d->random.seed(options_.seed + i * 0x9E3779B97F4A7C15ull);
    d->pick_shape = std::discrete_distribution<int>(shape_weights_.begin(),
                                                    shape_weights_.end());
    d->pick_own_call = std::bernoulli_distribution(options_.unary_share);
    {
      absl::MutexLock lock(&d->mu);
      d->records.reserve(4096);
    }
    dispatchers_.push_back(std::move(d));
  }
}

int LoadRun::TargetIndex(const std::string& target) const {
  return static_cast<int>(std::find(targets_.begin(), targets_.end(), target) -
                          targets_.begin());
}

void LoadRun::DispatchLoop(Dispatcher* d, Clock::time_point warmup_end,
                           Clock::time_point stop_at) {
  const bool by_count = options_.count > 0;
  const Clock::time_point start =
      warmup_end - absl::ToChronoNanoseconds(options_.warmup);
  std::exponential_distribution<double> poisson_gap(d->rate > 0 ? d->rate
                                                                : 1.0);
  // Dispatchers start out of phase: with constant gaps, dispatcher i of n
  // starts i/rate late so that together they start a job every 1/rate;
  // with Poisson gaps each draws its first gap (the sum of independent
  // Poisson processes is one of the summed rate).
  Clock::time_point next_arrival = start;
  if (options_.rate > 0 && d->index > 0) {
    const double offset_s =
        options_.poisson ? poisson_gap(d->random) : d->index / options_.rate;
    next_arrival += std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(offset_s));
  }
  const absl::Condition below_cap(d, &Dispatcher::BelowCap);
  while (true) {
    // Wait for a free worker (closed loop) or room under the cap.
    {
      absl::MutexLock lock(&d->mu);
      while (!d->BelowCap()) {
        d->mu.AwaitWithTimeout(below_cap, absl::Milliseconds(50));
        if (!by_count && Clock::now() >= stop_at) break;
      }
    }
    Clock::time_point scheduled;
    if (options_.rate > 0) {
      scheduled = next_arrival;
      const double gap_s =
          options_.poisson ? poisson_gap(d->random) : 1.0 / d->rate;
      next_arrival += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(gap_s));
    } else {
      scheduled = Clock::now();
    }
    const bool measured = scheduled >= warmup_end;
    if (by_count) {
      // Claimed before sleeping, so that exactly `count` measured jobs start
      // over all dispatchers.
      if (measured && measured_claimed_.fetch_add(1) >= options_.count) break;
    } else if (scheduled >= stop_at) {
      break;
    }
    if (options_.rate > 0) std::this_thread::sleep_until(scheduled);
    Dispatch(d, scheduled, measured);
  }
  for (int slot : d->slots) streams_[slot]->Finish().IgnoreError();
  for (auto& stream : d->broken_streams) stream->Finish().IgnoreError();
  // Jobs on calls of their own (unary, split) end apart from the streams;
  // the report counts them too, and their callbacks use this LoadRun.
  absl::MutexLock lock(&d->mu);
  d->mu.Await(absl::Condition(d, &Dispatcher::Idle));
}

void LoadRun::Dispatch(Dispatcher* d, Clock::time_point scheduled,
                       bool measured) {
  const int shape = d->pick_shape(d->random);
  // Drawn only when asked for, so that runs without it draw as before.
  const bool own_call = options_.unary_share > 0 && d->pick_own_call(d->random);
  const int slot = d->slots[d->next_slot++ % d->slots.size()];
  if (streams_[slot]->done()) {
    // The stream broke (e.g. the server went away): reopen it; the old one
    // is kept until the end, since it cannot be destroyed from its own
    // callbacks.
    d->broken_streams.push_back(std::move(streams_[slot]));
    streams_[slot] = client_->OpenStream();
    stream_target_[slot] = TargetIndex(streams_[slot]->target());
    ++d->stream_restarts;
  }
  const ShapeOperands& operands = shapes_[shape].operands;
  GemmArgs args = operands.SharedArgs();
  args.kernel = options_.kernel;
  args.check = options_.check;
  args.precision = options_.precision;
  args.timeout_ms = options_.job_timeout_ms;
  Call call = kStream;
  if (client_->WouldSplit(args)) {
    call = kSplit;
  } else if (own_call) {
    call = client_->WouldSendUnary(args) ? kUnary : kOwnStream;
  }
  float* out;
  {
    absl::MutexLock lock(&d->mu);
    if (d->free_buffers.empty()) {
      d->free_buffers.push_back(
          std::make_unique<float[]>(out_floats_ + scratch_floats_));
    }
    out = d->free_buffers.back().release();
    d->free_buffers.pop_back();
    ++d->in_flight;
    ++d->sent_by_call[call];
  }
  const uint64_t seq = sent_.fetch_add(1, std::memory_order_relaxed);
  if (!measured) warmup_jobs_.fetch_add(1, std::memory_order_relaxed);
  const bool verified =
      options_.verify_every > 0 && seq % options_.verify_every == 0;
  int64_t result_slot = -1;
  if (region_ != nullptr && call != kSplit) {
    // The shape's operands, and a slot for the result, in the region.
    args.a_region = shapes_[shape].a_region;
    args.b_region = shapes_[shape].b_region;
    result_slot = result_slots_.Take();
    if (result_slot >= 0) {
      args.result_region = region_->At(static_cast<uint64_t>(result_slot));
    }
    if (verified) {
      // Its own operands go in the messages (below).
      args.a_region = args.b_region = RegionOffset();
    }
  }
  if (verified) {
    // Operands of its own, so that another job's result fails its check.
    const GemmArgs own =
        operands.JobArgs(seq / options_.verify_every, out + out_floats_);
    args.a = own.a;
    args.b = own.b;
    // The buffer is reused: without this, a result that never landed would
    // be checked on the C of an earlier job.
    std::fill_n(out, args.problem.c_elements(),
                std::numeric_limits<float>::quiet_NaN());
    if (result_slot >= 0) {
      region_
          ->Write(static_cast<uint64_t>(result_slot), out,
                  4 * args.problem.c_elements())
          .IgnoreError();
    }
  }
  const int target = stream_target_[slot];
  GemmCallback done = [this, d, shape, target, out, seq, result_slot, scheduled,
                       measured](absl::StatusOr<v1::Timing> result) {
    OnEnd(d, shape, target, out, seq, result_slot, scheduled, measured,
          std::move(result));
  };
  if (call == kStream) {
    server_side_jobs_.fetch_add(1, std::memory_order_relaxed);
    streams_[slot]->Submit(args, out, std::move(done));
  } else {
    // A split job's parts go out on several channels at once; other jobs
    // here on a call of their own.
    server_side_jobs_.fetch_add(
        call == kSplit ? client_->options().split_rows : 1,
        std::memory_order_relaxed);
    client_->GemmAsync(args, out, std::move(done));
  }
}

void LoadRun::OnEnd(Dispatcher* d, int shape, int target, float* out,
                    uint64_t seq, int64_t result_slot, Clock::time_point start,
                    bool measured, absl::StatusOr<v1::Timing> result) {
  JobRecord record;
  record.end = Clock::now();
  record.start = start;
  record.shape = shape;
  record.target = target;
  record.measured = measured;
  record.code = result.status().code();
  bool checked = false, good = true;
  if (result.ok()) {
    record.timing = std::move(*result);
    if (options_.verify_every > 0 && seq % options_.verify_every == 0) {
      checked = true;
      if (result_slot >= 0) {
        // The result is in the region.
        region_
            ->Read(
                static_cast<uint64_t>(result_slot), out,
                4 * shapes_[shape].operands.SharedArgs().problem.c_elements())
            .IgnoreError();
      }
      // Within what the arithmetic that ran allows (1e-5 for float32).
      good =
          shapes_[shape].operands.JobError(seq / options_.verify_every, out) <=
          VerifyTolerance(PrecisionNamed(record.timing.precision()));
    }
  }
  // A failed job may still write its slot later (its call ended, not the
  // job): that slot is not used again.
  if (result.ok()) result_slots_.Give(result_slot);
  absl::MutexLock lock(&d->mu);
  if (!result.ok() && d->error_sample.count(record.code) == 0) {
    d->error_sample[record.code] = std::string(result.status().message());
  }
  d->free_buffers.emplace_back(out);
  --d->in_flight;
  ++d->completed;
  if (!result.ok()) ++d->errors;
  if (checked) {
    ++d->verified;
    if (!good) ++d->verify_failures;
  }
  if (result.ok() && options_.on_progress) {
    d->last_second_ms.push_back(Millis(record.end - start));
  }
  d->records.push_back(std::move(record));
}

LoadReport LoadRun::Run() {
  Prepare();
  const Clock::time_point start = Clock::now();
  const Clock::time_point warmup_end =
      start + absl::ToChronoNanoseconds(options_.warmup);
  const Clock::time_point stop_at =
      warmup_end + absl::ToChronoNanoseconds(options_.duration);

  std::atomic<bool> running{true};
  std::thread progress_thread;
  if (options_.on_progress) {
    progress_thread = std::thread([&] {
      Clock::time_point next = start + std::chrono::seconds(1);
      while (running.load()) {
        std::this_thread::sleep_until(
            std::min(next, Clock::now() + std::chrono::milliseconds(50)));
        if (Clock::now() < next) continue;
        next += std::chrono::seconds(1);
        ReportProgress(start, warmup_end);
      }
    });
  }
  for (auto& d : dispatchers_) {
    Dispatcher* dispatcher = d.get();
    d->thread = std::thread([this, dispatcher, warmup_end, stop_at] {
      DispatchLoop(dispatcher, warmup_end, stop_at);
    });
  }
  for (auto& d : dispatchers_) d->thread.join();
  running.store(false);
  if (progress_thread.joinable()) progress_thread.join();
  return ReportOf(warmup_end);
}

}  // namespace gemm::client
