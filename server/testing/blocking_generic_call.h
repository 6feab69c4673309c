// BlockingGenericCall: a test's streaming call of raw messages
// (grpc::ByteBuffer) to any method, made through grpc::GenericStub and
// driven one operation at a time, so that a test can send exactly the bytes
// it means to, malformed ones included.
//
// Thread-safety: one thread drives the call; Cancel() may come from any.
//
//   BlockingGenericCall call(&stub, "/gemm.v1.GemmService/GemmStream");
//   ASSERT_TRUE(call.Write(wire::EncodeWholeJob(1, params, operands)));
//   call.WritesDone();
//   for (grpc::ByteBuffer response; call.Read(&response);) { ... }
//   grpc::Status status = call.Finish();
#ifndef GEMM_SERVER_TESTING_BLOCKING_GENERIC_CALL_H_
#define GEMM_SERVER_TESTING_BLOCKING_GENERIC_CALL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace gemm::server {

class BlockingGenericCall {
 public:
  // Starts a call of `method` ("/package.Service/Method") with a deadline
  // `timeout` from now (default: none).
  BlockingGenericCall(grpc::GenericStub* stub, const std::string& method,
                      absl::Duration timeout = absl::InfiniteDuration());
  ~BlockingGenericCall();

  // False once the call is broken or over.
  bool Write(const grpc::ByteBuffer& message);
  void WritesDone();
  // False once the server has sent everything.
  bool Read(grpc::ByteBuffer* message);
  // The call's status; after the last Read().
  grpc::Status Finish();
  void Cancel() { context_.TryCancel(); }

 private:
  void* Tag() { return reinterpret_cast<void*>(++tag_); }
  // Waits for the operation just started; whether it succeeded.
  bool Wait();

  grpc::ClientContext context_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  intptr_t tag_ = 0;
};

}  // namespace gemm::server

#endif  // GEMM_SERVER_TESTING_BLOCKING_GENERIC_CALL_H_
