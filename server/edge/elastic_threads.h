// ElasticThreads: runs each task on a thread of its own pool, starting a
// thread whenever none is idle (up to a maximum) and ending threads that
// stay idle. It is for work that may hold its thread for a long time, so
// that one such task cannot delay the next: TcpAcceptor hands connections
// to gRPC through it, because gRPC 1.51 can go on reading a connection
// inside the hand-off call for as long as its client keeps sending
// (see tcp_acceptor.h).
//
// Thread-safety: every method may be called from any thread, except that
// the destructor must not run on one of the pool's threads.
//
//   ElasticThreads threads({.name = "gemm-handoff"});
//   if (!threads.Run([fd = std::move(fd)]() mutable { Use(fd); })) ...;
//   threads.Close();  // queued tasks are dropped; running ones finish
#ifndef GEMM_SERVER_EDGE_ELASTIC_THREADS_H_
#define GEMM_SERVER_EDGE_ELASTIC_THREADS_H_

#include <cstddef>
#include <deque>
#include <list>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gemm::server {

class ElasticThreads {
 public:
  struct Options {
    // Threads at most; when all are busy, tasks wait in the queue.
    size_t max_threads = 64;
    // Tasks waiting at most; Run() refuses more.
    size_t max_queued = 1024;
    // A thread idle this long ends (one is started again when needed).
    absl::Duration idle_exit = absl::Seconds(10);
    // The threads' name (at most 15 characters are kept), as `top -H`,
    // gdb and the attack harness show it.
    std::string name = "gemm-worker";
  };

  explicit ElasticThreads(Options options);
  // Close(), then waits for the running tasks to end.
  ~ElasticThreads();
  ElasticThreads(const ElasticThreads&) = delete;
  ElasticThreads& operator=(const ElasticThreads&) = delete;

  // Queues `task` to run on a pool thread. False, with `task` destroyed
  // unrun, once closed, when max_queued tasks are waiting, or when no
  // thread runs and none can be started.
  bool Run(absl::AnyInvocable<void()> task);

  // Takes no more tasks and destroys the queued ones unrun (their captures
  // are released: a task that owns a resource frees it that way). Tasks
  // already running go on.
  void Close();

  // Threads now, busy or idle; threads idle; tasks waiting.
  size_t threads() const;
  size_t idle() const;
  size_t queued() const;

 private:
  void WorkerLoop();
  // Joins threads that have ended.
  void ReapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const Options options_;
  mutable absl::Mutex mutex_;
  absl::CondVar wake_;
  std::deque<absl::AnyInvocable<void()>> queue_ ABSL_GUARDED_BY(mutex_);
  std::list<std::thread> threads_ ABSL_GUARDED_BY(mutex_);
  // Threads that have ended and wait to be joined.
  std::list<std::thread::id> ended_ ABSL_GUARDED_BY(mutex_);
  size_t idle_ ABSL_GUARDED_BY(mutex_) = 0;
  bool closed_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_EDGE_ELASTIC_THREADS_H_
