#include "server/edge/unary_read_gate.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gemm::server {
namespace {

// A call that records what the gate did with it.
struct Call : UnaryReadGate::Waiter {
  int started = 0;
  int refused = 0;
  absl::Status refusal;
  void StartReading() override { ++started; }
  void Refuse(const absl::Status& status) override {
    ++refused;
    refusal = status;
  }
};

TEST(UnaryReadGateTest, AClientReadsAtMostItsTurnsAtOnce) {
  UnaryReadGate gate({.max_reads_per_client = 2});
  std::vector<Call> calls(5);
  for (Call& call : calls) ASSERT_TRUE(gate.Enter("a", &call).ok());
  EXPECT_EQ(calls[0].started, 1);
  EXPECT_EQ(calls[1].started, 1);
  EXPECT_EQ(calls[2].started, 0);
  EXPECT_EQ(gate.reading(), 2u);
  EXPECT_EQ(gate.waiting(), 3u);
  // Each read that ends passes its turn to the oldest waiting call.
  gate.Leave("a");
  EXPECT_EQ(calls[2].started, 1);
  EXPECT_EQ(calls[3].started, 0);
  gate.Leave("a");
  gate.Leave("a");
  EXPECT_EQ(calls[3].started, 1);
  EXPECT_EQ(calls[4].started, 1);
  EXPECT_EQ(gate.waiting(), 0u);
  EXPECT_EQ(gate.reading(), 2u);
  gate.Leave("a");
  gate.Leave("a");
  EXPECT_EQ(gate.reading(), 0u);
  for (const Call& call : calls) EXPECT_EQ(call.started, 1);
}

TEST(UnaryReadGateTest, OneClientWaitingLeavesAnotherReading) {
  UnaryReadGate gate({.max_reads_per_client = 1});
  Call a1, a2, b1;
  ASSERT_TRUE(gate.Enter("a", &a1).ok());
  ASSERT_TRUE(gate.Enter("a", &a2).ok());
  ASSERT_TRUE(gate.Enter("b", &b1).ok());
  EXPECT_EQ(a2.started, 0);
  EXPECT_EQ(b1.started, 1) << "b's turn does not depend on a's";
}

TEST(UnaryReadGateTest, WaitingPastTheLimitIsRefusedNamingIt) {
  UnaryReadGate gate({.max_reads_per_client = 1, .max_waiting_per_client = 2});
  Call reading, w1, w2, extra, other;
  ASSERT_TRUE(gate.Enter("a", &reading).ok());
  ASSERT_TRUE(gate.Enter("a", &w1).ok());
  ASSERT_TRUE(gate.Enter("a", &w2).ok());
  const absl::Status status = gate.Enter("a", &extra);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("--max-client-jobs 2"), std::string::npos)
      << status.message();
  EXPECT_EQ(extra.started, 0);
  EXPECT_TRUE(gate.Enter("b", &other).ok());
  EXPECT_EQ(other.started, 1);
}

TEST(UnaryReadGateTest, AWithdrawnCallGetsNoTurn) {
  UnaryReadGate gate({.max_reads_per_client = 1});
  Call reading, gone, next;
  ASSERT_TRUE(gate.Enter("a", &reading).ok());
  ASSERT_TRUE(gate.Enter("a", &gone).ok());
  ASSERT_TRUE(gate.Enter("a", &next).ok());
  EXPECT_TRUE(gate.Withdraw("a", &gone));
  EXPECT_FALSE(gate.Withdraw("a", &gone)) << "only once";
  EXPECT_FALSE(gate.Withdraw("a", &reading)) << "its read has begun";
  gate.Leave("a");
  EXPECT_EQ(gone.started, 0);
  EXPECT_EQ(next.started, 1);
}

TEST(UnaryReadGateTest, RefuseAllEndsWaitingCallsAndLaterOnes) {
  UnaryReadGate gate({.max_reads_per_client = 1});
  Call reading, waiting, late;
  ASSERT_TRUE(gate.Enter("a", &reading).ok());
  ASSERT_TRUE(gate.Enter("a", &waiting).ok());
  gate.RefuseAll(absl::UnavailableError("shutting down"));
  EXPECT_EQ(waiting.refused, 1);
  EXPECT_EQ(waiting.refusal.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(gate.waiting(), 0u);
  EXPECT_EQ(gate.Enter("a", &late).code(), absl::StatusCode::kUnavailable);
  gate.Leave("a");  // the read that was going on ends
  EXPECT_EQ(waiting.started, 0);
  EXPECT_EQ(gate.reading(), 0u);
}

TEST(UnaryReadGateTest, AtLeastOneReadPerClient) {
  UnaryReadGate gate({.max_reads_per_client = 0});
  Call call;
  ASSERT_TRUE(gate.Enter("a", &call).ok());
  EXPECT_EQ(call.started, 1);
}

// A call whose read ends at once (its message had arrived) leaves the gate
// from inside StartReading, as gRPC may: the gate's lock is not held then.
struct ImmediateCall : UnaryReadGate::Waiter {
  UnaryReadGate* gate = nullptr;
  int started = 0;
  void StartReading() override {
    ++started;
    gate->Leave("a");
  }
  void Refuse(const absl::Status&) override {}
};

TEST(UnaryReadGateTest, ACallMayLeaveFromInsideItsTurn) {
  UnaryReadGate gate({.max_reads_per_client = 1});
  Call holding;
  ASSERT_TRUE(gate.Enter("a", &holding).ok());
  std::vector<ImmediateCall> calls(3);
  for (ImmediateCall& call : calls) {
    call.gate = &gate;
    ASSERT_TRUE(gate.Enter("a", &call).ok());
  }
  gate.Leave("a");  // holding's read ends: the three run one after another
  for (const ImmediateCall& call : calls) EXPECT_EQ(call.started, 1);
  EXPECT_EQ(gate.reading(), 0u);
  EXPECT_EQ(gate.waiting(), 0u);
}

// Many threads entering, leaving and withdrawing: every call ends either
// started once or withdrawn, and the gate ends empty.
TEST(UnaryReadGateTest, ConcurrentCallsAllEndAndTheGateEmpties) {
  // Two threads per client and one turn: one thread's call waits whenever
  // the other's holds the turn.
  UnaryReadGate gate({.max_reads_per_client = 1});
  struct Counted : UnaryReadGate::Waiter {
    std::atomic<int> started{0};
    void StartReading() override { started.fetch_add(1); }
    void Refuse(const absl::Status&) override {}
  };
  constexpr int kThreads = 4, kCalls = 2000;
  std::vector<std::vector<Counted>> calls(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    calls[t] = std::vector<Counted>(kCalls);
    threads.emplace_back([&, t] {
      const std::string client = t % 2 == 0 ? "a" : "b";
      for (int i = 0; i < kCalls; ++i) {
        Counted& call = calls[t][i];
        ASSERT_TRUE(gate.Enter(client, &call).ok());
        if (i % 3 == 0 && gate.Withdraw(client, &call)) continue;
        // Wait for the turn, then give it back.
        while (call.started.load() == 0) std::this_thread::yield();
        gate.Leave(client);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const auto& per_thread : calls) {
    for (const Counted& call : per_thread) EXPECT_LE(call.started.load(), 1);
  }
  EXPECT_EQ(gate.reading(), 0u);
  EXPECT_EQ(gate.waiting(), 0u);
}

}  // namespace
}  // namespace gemm::server
