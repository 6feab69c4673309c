#include "server/edge/early_cancel_interceptor.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "grpcpp/server_context.h"
#include "grpcpp/support/interceptor.h"

namespace gemm::server {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;

class EarlyCancelInterceptor final : public grpc::experimental::Interceptor {
 public:
  EarlyCancelInterceptor(grpc::ServerContextBase* context,
                         const EarlyCancelCallback* on_early_cancel)
      : context_(context),
        on_early_cancel_(on_early_cancel),
        // gRPC forgets the peer once the call is over.
        peer_(context->peer()) {}

  void Intercept(InterceptorBatchMethods* methods) override {
    // A unary call whose request never came still passes this hook point,
    // with no message.
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() != nullptr) {
      got_request_.store(true);
    }
    // IsCancelled() is settled by now.
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_CLOSE) &&
        !got_request_.load() && context_->IsCancelled()) {
      (*on_early_cancel_)(peer_, began_, context_->deadline());
    }
    methods->Proceed();
  }

 private:
  grpc::ServerContextBase* const context_;
  const EarlyCancelCallback* const on_early_cancel_;
  const std::string peer_;
  const std::chrono::system_clock::time_point began_ =
      std::chrono::system_clock::now();
  // The two hook points come in different batches, which may run at once
  // on two threads.
  std::atomic<bool> got_request_{false};
};

class EarlyCancelInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  EarlyCancelInterceptorFactory(std::vector<std::string> skip,
                                EarlyCancelCallback on_early_cancel)
      : skip_(std::move(skip)), on_early_cancel_(std::move(on_early_cancel)) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (std::find(skip_.begin(), skip_.end(), info->method()) != skip_.end()) {
      return nullptr;
    }
    return new EarlyCancelInterceptor(info->server_context(),
                                      &on_early_cancel_);
  }

 private:
  const std::vector<std::string> skip_;
  const EarlyCancelCallback on_early_cancel_;
};

}  // namespace

std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MakeEarlyCancelInterceptors(std::vector<std::string> skip,
                            EarlyCancelCallback on_early_cancel) {
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      factories;
  factories.push_back(std::make_unique<EarlyCancelInterceptorFactory>(
      std::move(skip), std::move(on_early_cancel)));
  return factories;
}

}  // namespace gemm::server
