#include "server/edge/elastic_threads.h"

#include <pthread.h>

#include <algorithm>
#include <system_error>
#include <utility>

namespace gemm::server {

ElasticThreads::ElasticThreads(Options options)
    : options_(std::move(options)) {}

ElasticThreads::~ElasticThreads() {
  Close();
  std::list<std::thread> threads;
  {
    absl::MutexLock lock(&mutex_);
    threads.swap(threads_);
    ended_.clear();
  }
  for (std::thread& thread : threads) thread.join();
}

bool ElasticThreads::Run(absl::AnyInvocable<void()> task) {
  absl::MutexLock lock(&mutex_);
  if (closed_ || queue_.size() >= options_.max_queued) return false;
  ReapLocked();
  queue_.push_back(std::move(task));
  if (idle_ >= queue_.size()) {
    wake_.Signal();
  } else if (threads_.size() - ended_.size() <
             std::max<size_t>(options_.max_threads, 1)) {
    try {
      threads_.emplace_back([this] { WorkerLoop(); });
    } catch (const std::system_error&) {
      // Out of threads (EAGAIN): a running thread takes the task later;
      // with none running, nobody would.
      if (threads_.size() == ended_.size()) {
        absl::AnyInvocable<void()> dropped = std::move(queue_.back());
        queue_.pop_back();
        mutex_.Unlock();
        dropped = nullptr;  // its captures are released unlocked
        mutex_.Lock();
        return false;
      }
    }
  }
  return true;
}

void ElasticThreads::Close() {
  std::deque<absl::AnyInvocable<void()>> dropped;
  {
    absl::MutexLock lock(&mutex_);
    closed_ = true;
    dropped.swap(queue_);
    wake_.SignalAll();
  }
  // `dropped` goes out of scope here, unlocked: its captures may do work
  // (close a socket) when released.
}

size_t ElasticThreads::threads() const {
  absl::MutexLock lock(&mutex_);
  return threads_.size() - ended_.size();
}

size_t ElasticThreads::idle() const {
  absl::MutexLock lock(&mutex_);
  return idle_;
}

size_t ElasticThreads::queued() const {
  absl::MutexLock lock(&mutex_);
  return queue_.size();
}

void ElasticThreads::ReapLocked() {
  for (const std::thread::id id : ended_) {
    for (auto it = threads_.begin(); it != threads_.end(); ++it) {
      if (it->get_id() != id) continue;
      // It has left the lock for good: the join returns at once.
      it->join();
      threads_.erase(it);
      break;
    }
  }
  ended_.clear();
}

void ElasticThreads::WorkerLoop() {
  pthread_setname_np(pthread_self(), options_.name.substr(0, 15).c_str());
  absl::MutexLock lock(&mutex_);
  while (true) {
    if (queue_.empty() && !closed_) {
      ++idle_;
      const absl::Time until = absl::Now() + options_.idle_exit;
      while (queue_.empty() && !closed_ &&
             !wake_.WaitWithDeadline(&mutex_, until)) {
      }
      --idle_;
    }
    if (queue_.empty()) break;  // idle too long, or closed
    absl::AnyInvocable<void()> task = std::move(queue_.front());
    queue_.pop_front();
    mutex_.Unlock();
    task();
    task = nullptr;  // its captures are released outside the lock too
    mutex_.Lock();
  }
  ended_.push_back(std::this_thread::get_id());
}

}  // namespace gemm::server
