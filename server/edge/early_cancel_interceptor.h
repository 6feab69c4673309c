// EarlyCancelInterceptors: notices, for every method but those whose
// reactors count for themselves, the calls that a client cancels before
// their request arrived: the calls of an HTTP/2 rapid reset.
//
// gRPC makes a call's interceptors once the call is matched to its method:
// a stream's, a generic call's and an unknown method's at their headers,
// but a registered unary method's only once its request has arrived, and
// a registered unary call reset before that is dropped unseen. So the
// server serves its unary methods and the health service as generic calls
// (gemm_service.h, health_service.h), and this interceptor sees each call
// end (POST_RECV_CLOSE) and knows whether a request came
// (POST_RECV_MESSAGE). Gemm and GemmStream count their own
// (GemmServiceImpl::MethodsCountingEarlyCancels()), so their calls, the
// bulk of the traffic, go without an interceptor.
//
// Thread-safety: the factory is thread-safe; `on_early_cancel` is called
// from gRPC's threads, any number at once.
//
//   builder.experimental().SetInterceptorCreators(
//       MakeEarlyCancelInterceptors({"/gemm.v1.GemmService/Gemm"},
//                                   on_early_cancel));
#ifndef GEMM_SERVER_EDGE_EARLY_CANCEL_INTERCEPTOR_H_
#define GEMM_SERVER_EDGE_EARLY_CANCEL_INTERCEPTOR_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/support/server_interceptor.h"

namespace gemm::server {

// A call of `peer` (grpc::ServerContextBase::peer()) that began at `began`,
// with `deadline`, cancelled by its client before its request arrived.
using EarlyCancelCallback = std::function<void(
    const std::string& peer, std::chrono::system_clock::time_point began,
    std::chrono::system_clock::time_point deadline)>;

// The interceptor factories to give gRPC (one): calls of the full method
// names in `skip` ("/package.Service/Method") get no interceptor.
std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MakeEarlyCancelInterceptors(std::vector<std::string> skip,
                            EarlyCancelCallback on_early_cancel);

}  // namespace gemm::server

#endif  // GEMM_SERVER_EDGE_EARLY_CANCEL_INTERCEPTOR_H_
