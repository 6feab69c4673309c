// EarlyCancelInterceptors: notices, for every method but those whose
// reactors count for themselves, the calls that a client cancels before
// their request arrived: the calls of an HTTP/2 rapid reset.
//
// A unary method of gRPC's callback API (Info, the region calls, the
// health check) begins only once its request has arrived; a call reset
// before that is ended by gRPC without the service seeing it, and a
// method that the server does not serve is refused the same way. An
// interceptor sees each of those calls end (POST_RECV_CLOSE) whatever its
// method, and knows whether a request came (POST_RECV_MESSAGE). Gemm and
// GemmStream count their own (gemm_service.h, gemm_stream_reactor.h), so
// their calls, the bulk of the traffic, go without an interceptor.
//
// Thread-safety: the factory is thread-safe; `on_early_cancel` is called
// from gRPC's threads, any number at once.
//
//   builder.experimental().SetInterceptorCreators(
//       MakeEarlyCancelInterceptors({"/gemm.v1.GemmService/Gemm"},
//                                   on_early_cancel));
#ifndef GEMM_SERVER_EARLY_CANCEL_INTERCEPTOR_H_
#define GEMM_SERVER_EARLY_CANCEL_INTERCEPTOR_H_

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

#endif  // GEMM_SERVER_EARLY_CANCEL_INTERCEPTOR_H_
