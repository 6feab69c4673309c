#include "server/scheduling/batch_scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

const Clock* Clock::Real() {
  static const RealClock* const clock = new RealClock();
  return clock;
}

absl::StatusOr<std::unique_ptr<BatchScheduler>> BatchScheduler::Create(
    const Options& options, Executor* executor) {
  if (executor == nullptr) {
    return absl::InvalidArgumentError("BatchScheduler needs an executor");
  }
  if (options.max_batch_size < 1) {
    return absl::InvalidArgumentError("max_batch_size must be at least 1");
  }
  if (options.max_queued_jobs < 1) {
    return absl::InvalidArgumentError("max_queued_jobs must be at least 1");
  }
  if (options.num_workers < 1) {
    return absl::InvalidArgumentError("num_workers must be at least 1");
  }
  if (options.light_workers < 0 ||
      options.light_workers >= options.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "light_workers must be 0 or more and fewer than num_workers (",
        options.num_workers, "), got ", options.light_workers));
  }
  if (options.light_workers > 0 && !options.light) {
    return absl::InvalidArgumentError("light_workers need a light function");
  }
  if (options.max_queue_delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("max_queue_delay must not be negative");
  }
  return std::unique_ptr<BatchScheduler>(new BatchScheduler(options, executor));
}

BatchScheduler::BatchScheduler(const Options& options, Executor* executor)
    : options_(options),
      executor_(executor),
      clock_(options.clock != nullptr ? options.clock : Clock::Real()) {
  for (int i = 0; i < options_.num_workers; ++i) {
    const bool light_only = i < options_.light_workers;
    workers_.emplace_back([this, light_only] { WorkerLoop(light_only); });
  }
}

BatchScheduler::~BatchScheduler() { Stop(); }

absl::Status BatchScheduler::Submit(std::shared_ptr<GemmJob> job) {
  absl::MutexLock lock(&mu_);
  if (!accepting_) {
    return absl::UnavailableError("server is shutting down");
  }
  if (queue_.size() >= options_.max_queued_jobs) {
    return absl::UnavailableError(absl::StrFormat(
        "server overloaded: job queue full (%d jobs waiting); retry later",
        queue_.size()));
  }
  const uint32_t client_share =
      options_.max_queued_jobs - options_.max_queued_jobs / 4;
  size_t& client_queued = client_queued_[job->client()];
  if (client_queued >= client_share) {
    return absl::UnavailableError(absl::StrFormat(
        "server overloaded: client %s has %d jobs queued, its share of the "
        "job queue; retry later",
        job->client().empty() ? "(unnamed)" : job->client(), client_queued));
  }
  ++client_queued;
  if (IsLight(*job)) ++light_queued_;
  queue_.push_back(std::move(job));
  return absl::OkStatus();
}

bool BatchScheduler::accepting() const {
  absl::MutexLock lock(&mu_);
  return accepting_;
}

void BatchScheduler::StopAccepting() {
  absl::MutexLock lock(&mu_);
  accepting_ = false;
  // Run what is queued now, without waiting for batches to fill.
  stopping_ = true;
}

void BatchScheduler::Stop() {
  StopAccepting();
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
}

size_t BatchScheduler::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

namespace {

// Why a queued job must not run, or OK when it may.
absl::Status DeadStatus(const GemmJob& job, absl::Time now) {
  if (job.IsCancelled()) {
    return absl::CancelledError("job cancelled by the caller");
  }
  if (now >= job.deadline()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "deadline passed after the job waited ",
        absl::FormatDuration(now - job.ready_time()), " in the queue"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::pair<std::shared_ptr<GemmJob>, absl::Status>>
BatchScheduler::DropDead() {
  std::vector<std::pair<std::shared_ptr<GemmJob>, absl::Status>> dead;
  const absl::Time now = clock_->Now();
  for (auto it = queue_.begin(); it != queue_.end();) {
    absl::Status why = DeadStatus(**it, now);
    if (why.ok()) {
      ++it;
      continue;
    }
    dead.emplace_back(*it, std::move(why));
    it = Unqueue(it);
  }
  return dead;
}

std::deque<std::shared_ptr<GemmJob>>::iterator BatchScheduler::Unqueue(
    std::deque<std::shared_ptr<GemmJob>>::iterator it) {
  if (IsLight(**it)) --light_queued_;
  auto client = client_queued_.find((*it)->client());
  if (client != client_queued_.end() && --client->second == 0) {
    client_queued_.erase(client);
  }
  return queue_.erase(it);
}

bool BatchScheduler::QueuedFor(bool light_only) const {
  return light_only ? light_queued_ > 0 : !queue_.empty();
}

size_t BatchScheduler::LeadIndex(bool light_only) const {
  // Each client's oldest job; the common case, one client, is the front.
  size_t next = queue_.size();   // the first client after last_client_
  size_t first = queue_.size();  // the first client of all, to wrap to
  for (size_t i = 0; i < queue_.size(); ++i) {
    if (light_only && !IsLight(*queue_[i])) continue;
    const std::string& client = queue_[i]->client();
    if (first == queue_.size() || client < queue_[first]->client()) {
      first = i;
    }
    if (client > last_client_ &&
        (next == queue_.size() || client < queue_[next]->client())) {
      next = i;
    }
  }
  return next != queue_.size() ? next : first;
}

absl::Condition BatchScheduler::HasWork(const Waiter* waiter) {
  return absl::Condition(
      +[](const Waiter* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return w->self->stopping_ || w->self->QueuedFor(w->light_only);
      },
      waiter);
}

Batch BatchScheduler::NextBatch(bool light_only) {
  const Waiter waiter{this, light_only};
  while (true) {
    mu_.Await(HasWork(&waiter));
    if (!QueuedFor(light_only)) return {};  // stopping, nothing left for it

    const size_t lead_index = LeadIndex(light_only);
    const GemmJob& lead = *queue_[lead_index];
    size_t companions = 0;
    // The lead runs once any queued job this worker may take has waited
    // the delay, so that taking turns never leaves a job that is due
    // waiting on an idle worker.
    absl::Time oldest = lead.ready_time();
    for (const auto& job : queue_) {
      if (light_only && !IsLight(*job)) continue;
      if (job->spec().SameBatchAs(lead.spec())) ++companions;
      oldest = std::min(oldest, job->ready_time());
    }
    const absl::Time run_at = oldest + options_.max_queue_delay;
    const absl::Time now = clock_->Now();
    if (companions >= options_.max_batch_size || stopping_ || now >= run_at) {
      Batch batch;
      batch.push_back(queue_[lead_index]);
      Unqueue(queue_.begin() + lead_index);
      last_client_ = batch.front()->client();
      const JobSpec& key = batch.front()->spec();
      for (auto it = queue_.begin();
           it != queue_.end() && batch.size() < options_.max_batch_size;) {
        if ((*it)->spec().SameBatchAs(key)) {
          batch.push_back(*it);
          it = Unqueue(it);
        } else {
          ++it;
        }
      }
      return batch;
    }
    // Wait for more jobs, the delay to run out, or a stop.
    const size_t seen = queue_.size();
    struct WaitState {
      BatchScheduler* self;
      size_t seen;
    } state{this, seen};
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](WaitState* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                               return w->self->stopping_ ||
                                      w->self->queue_.size() != w->seen;
                             },
                             &state),
                         run_at - now);
  }
}

void BatchScheduler::WorkerLoop(bool light_only) {
  absl::Status prepared = executor_->PrepareWorkerThread();
  if (!prepared.ok()) {
    spdlog::warn("worker thread preparation failed: {}", prepared.ToString());
  }
  while (true) {
    Batch batch;
    std::vector<std::pair<std::shared_ptr<GemmJob>, absl::Status>> dead;
    {
      absl::MutexLock lock(&mu_);
      // Drop what died while waiting, then form a batch from the living.
      const Waiter waiter{this, light_only};
      while (true) {
        mu_.Await(HasWork(&waiter));
        auto dropped = DropDead();
        for (auto& d : dropped) dead.push_back(std::move(d));
        if (!dead.empty() || stopping_ || QueuedFor(light_only)) break;
      }
      if (dead.empty()) {
        batch = NextBatch(light_only);
        // Jobs can die while a partial batch waits for company.
        const absl::Time now = clock_->Now();
        for (auto it = batch.begin(); it != batch.end();) {
          absl::Status why = DeadStatus(**it, now);
          if (why.ok()) {
            ++it;
            continue;
          }
          dead.emplace_back(std::move(*it), std::move(why));
          it = batch.erase(it);
        }
      }
    }
    for (auto& [job, status] : dead) job->Finish(std::move(status));
    if (batch.empty()) {
      if (dead.empty()) return;  // stopping, and nothing left
      continue;
    }

    const absl::Time start = clock_->Now();
    for (const auto& job : batch) {
      job->timing().queued = start - job->ready_time();
      job->timing().batch_size = static_cast<uint32_t>(batch.size());
    }
    absl::Status status = executor_->Execute(batch);
    if (!status.ok()) {
      spdlog::error("batch of {} job(s) {} on kernel {} failed: {}",
                    batch.size(), batch.front()->problem().ToString(),
                    std::string(batch.front()->kernel().name()),
                    status.ToString());
    }
    const absl::Time end = clock_->Now();
    for (const auto& job : batch) {
      job->timing().server = end - job->ready_time();
    }
    for (const auto& job : batch) job->Finish(status);
  }
}

}  // namespace gemm::server
