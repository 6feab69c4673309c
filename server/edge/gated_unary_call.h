// GatedUnaryCall: a unary call served as a stream of gRPC's generic API
// whose one request message is read in its client's turn at a
// UnaryReadGate (unary_read_gate.h), or at once where there is no gate.
// Gemm's calls, the other GemmService unary methods and the health check
// read their requests so; each says what its request is for (OnRequest)
// and how a call that is never read ends (Refuse).
//
// The turn is taken in Begin(), after construction, since the read may
// start at once. It goes to the client's next call as this read ends,
// whatever came of it. A call still waiting when its caller cancels it
// leaves the line and is refused with CANCELLED.
//
// Thread-safety: as any gRPC reactor; the gate calls StartReading and
// Refuse on the thread that calls Enter, Leave or RefuseAll.
//
//   class Echo : public GatedUnaryCall {
//     void OnRequest(bool ok) override { ... request() ... }
//     void Refuse(const absl::Status& s) override {
//       Finish(ToGrpcStatus(s));
//     }
//     void OnDone() override { delete this; }
//   };
//   auto* call = new Echo(&gate, client);
//   call->Begin();
#ifndef GEMM_SERVER_EDGE_GATED_UNARY_CALL_H_
#define GEMM_SERVER_EDGE_GATED_UNARY_CALL_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/edge/unary_read_gate.h"

namespace gemm::server {

class GatedUnaryCall : public grpc::ServerGenericBidiReactor,
                       public UnaryReadGate::Waiter {
 public:
  // The status of a call whose caller cancelled it while it waited.
  static constexpr char kCancelledWaiting[] =
      "the call ended while waiting for its request to be read";

  // `gate` may be null: the request is read at once.
  GatedUnaryCall(UnaryReadGate* gate, std::string client)
      : gate_(gate), client_(std::move(client)) {}

  // Takes a turn, or waits for one; a call the gate turns away is
  // refused (Refuse) with the gate's status.
  void Begin() {
    if (gate_ == nullptr) {
      StartReading();
      return;
    }
    const absl::Status status = gate_->Enter(client_, this);
    if (!status.ok()) Refuse(status);
  }

  const std::string& client() const { return client_; }
  grpc::ByteBuffer* request() { return &request_; }

  void StartReading() final { StartRead(&request_); }

  void OnReadDone(bool ok) final {
    if (gate_ != nullptr) gate_->Leave(client_);
    OnRequest(ok);
  }

  void OnCancel() override {
    // A call still waiting for its turn ends here; one being read ends in
    // OnRequest(false), one read as its subclass says.
    if (gate_ != nullptr && gate_->Withdraw(client_, this)) {
      Refuse(absl::CancelledError(kCancelledWaiting));
    }
  }

 protected:
  // The read is over, the turn handed on: the request is in request() when
  // `ok`; otherwise the caller half-closed without a message, or the call
  // is over (cancelled, past its deadline or past the message limit).
  virtual void OnRequest(bool ok) = 0;

 private:
  UnaryReadGate* const gate_;
  const std::string client_;
  grpc::ByteBuffer request_;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_EDGE_GATED_UNARY_CALL_H_
