// UnaryReadGate: how many unary requests one client may have arriving at
// once. gRPC reads a call's message only when the service asks for it, and
// then opens the stream's flow-control window to the whole announced
// length; a message still arriving sits in gRPC's buffers, counted by no
// one but gRPC's resource quota, which past its size cancels streams it
// picks at random, whoever owns them. So the service asks for a client's
// unary messages a few at a time: the rest of its calls wait, holding no
// more than their stream's initial window, and a client that announces
// large messages and never finishes them holds its own turns only.
//
// A client is its identity (call_auth.h, client_identity.h); the health
// service's callers, who need no token, are their addresses. Every unary
// method's requests go through one gate: Gemm's, Info's, the region
// calls' and the health check's.
//
// Thread-safety: thread-safe. The callbacks of a Waiter run outside the
// gate's lock, on the thread that calls Enter, Leave or RefuseAll.
//
//   UnaryReadGate gate({.max_reads_per_client = 8,
//                       .max_waiting_per_client = 4096});
//   RETURN_IF_ERROR(gate.Enter("10.0.0.7", &call));  // call.StartReading()
//   ...  // once the read is over (message or not):
//   gate.Leave("10.0.0.7");  // the client's next call starts reading
#ifndef GEMM_SERVER_EDGE_UNARY_READ_GATE_H_
#define GEMM_SERVER_EDGE_UNARY_READ_GATE_H_

#include <cstddef>
#include <deque>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace gemm::server {

class UnaryReadGate {
 public:
  struct Options {
    // Unary messages of one client being read at once. At least 1.
    size_t max_reads_per_client = 1;
    // Its calls waiting for a turn; past it a new call is refused with
    // RESOURCE_EXHAUSTED. Default 0: no limit.
    size_t max_waiting_per_client = 0;
  };

  // A call that waits for its turn to read.
  class Waiter {
   public:
    virtual ~Waiter() = default;
    // Its turn: read the message, then Leave().
    virtual void StartReading() = 0;
    // It will not get a turn (RefuseAll).
    virtual void Refuse(const absl::Status& status) = 0;
  };

  explicit UnaryReadGate(const Options& options);

  // Calls `waiter->StartReading()` now when `client` has a turn free, else
  // queues it behind the client's other waiting calls. RESOURCE_EXHAUSTED,
  // naming the limit, when the queue is full; UNAVAILABLE after
  // RefuseAll().
  absl::Status Enter(const std::string& client, Waiter* waiter);
  // A read of `client`'s is over: its turn goes to the oldest waiting call.
  void Leave(const std::string& client);
  // A waiting call gives up (its caller cancelled). True when it was still
  // waiting: it will get no turn. False when its turn has begun (or it was
  // never here).
  bool Withdraw(const std::string& client, Waiter* waiter);
  // Shutdown: every waiting call is refused with `status`, and so is every
  // call that enters from now on.
  void RefuseAll(const absl::Status& status);

  // Calls reading and calls waiting, all clients together.
  size_t reading() const;
  size_t waiting() const;
  const Options& options() const { return options_; }

 private:
  struct Client {
    size_t reading = 0;
    std::deque<Waiter*> waiting;
  };

  const Options options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Client> clients_ ABSL_GUARDED_BY(mu_);
  size_t reading_ ABSL_GUARDED_BY(mu_) = 0;
  size_t waiting_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_EDGE_UNARY_READ_GATE_H_
