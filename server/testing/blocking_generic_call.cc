#include "server/testing/blocking_generic_call.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace gemm::server {

BlockingGenericCall::BlockingGenericCall(grpc::GenericStub* stub,
                                         const std::string& method,
                                         absl::Duration timeout) {
  if (timeout != absl::InfiniteDuration()) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
  call_ = stub->PrepareCall(&context_, method, &cq_);
  call_->StartCall(Tag());
  EXPECT_TRUE(Wait()) << "the call did not start";
}

BlockingGenericCall::~BlockingGenericCall() {
  cq_.Shutdown();
  void* tag;
  bool ok;
  while (cq_.Next(&tag, &ok)) {
  }
}

bool BlockingGenericCall::Write(const grpc::ByteBuffer& message) {
  call_->Write(message, Tag());
  return Wait();
}

void BlockingGenericCall::WritesDone() {
  call_->WritesDone(Tag());
  Wait();
}

bool BlockingGenericCall::Read(grpc::ByteBuffer* message) {
  call_->Read(message, Tag());
  return Wait();
}

grpc::Status BlockingGenericCall::Finish() {
  grpc::Status status;
  call_->Finish(&status, Tag());
  Wait();
  return status;
}

bool BlockingGenericCall::Wait() {
  void* tag;
  bool ok = false;
  EXPECT_TRUE(cq_.Next(&tag, &ok));
  EXPECT_EQ(tag, reinterpret_cast<void*>(tag_));
  return ok;
}

}  // namespace gemm::server
