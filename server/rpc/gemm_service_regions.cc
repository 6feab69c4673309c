// GemmServiceImpl's shared-memory region calls (region_registry.h):
// RegisterRegion, UnregisterRegion and ListRegions. The rest of the
// service is in gemm_service.cc and gemm_service_calls.cc.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/wire_codec.h"
#include "server/edge/client_identity.h"
#include "server/rpc/gemm_service.h"

namespace gemm::server {

void GemmServiceImpl::ServeRegisterRegion(
    const grpc::CallbackServerContext& context, const grpc::ByteBuffer& request,
    Answer answer) {
  grpc::ByteBuffer response;
  auto run = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(const std::string owner, Identify(context));
    using Registrants = RegionRegistry::Registrants;
    if (regions_.options().registrants == Registrants::kNone) {
      return absl::UnimplementedError(
          "this server serves no shared-memory regions (gemm-server "
          "--regions off)");
    }
    if (regions_.options().registrants == Registrants::kLocal &&
        !IsLoopbackPeer(context.peer())) {
      return absl::PermissionDeniedError(absl::StrCat(
          "regions are registered from the server's host only, at a "
          "loopback address or on a Unix socket (this caller is ",
          ClientIdentityOfPeer(context.peer()),
          "); gemm-server --regions any accepts other addresses, e.g. "
          "containers on one host"));
    }
    v1::RegisterRegionRequest in;
    RETURN_IF_ERROR(wire::DecodeMessage(request, &in));
    v1::RegisterRegionResponse out;
    ASSIGN_OR_RETURN(*out.mutable_region(), regions_.Register(owner, in));
    response = wire::EncodeMessage(out);
    return absl::OkStatus();
  };
  const absl::Status status = run();
  answer(status, std::move(response));
}

void GemmServiceImpl::ServeUnregisterRegion(
    const grpc::CallbackServerContext& context, const grpc::ByteBuffer& request,
    Answer answer) {
  auto run = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(const std::string owner, Identify(context));
    v1::UnregisterRegionRequest in;
    RETURN_IF_ERROR(wire::DecodeMessage(request, &in));
    // Answered once no job uses the region and it is unmapped: now, or
    // when the last job using it ends.
    return regions_.Unregister(owner, in.name(), [answer] {
      answer(absl::OkStatus(),
             wire::EncodeMessage(v1::UnregisterRegionResponse()));
    });
  };
  const absl::Status status = run();
  if (!status.ok()) answer(status, grpc::ByteBuffer());
}

void GemmServiceImpl::ServeListRegions(
    const grpc::CallbackServerContext& context, const grpc::ByteBuffer& request,
    Answer answer) {
  grpc::ByteBuffer response;
  auto run = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(const std::string owner, Identify(context));
    v1::ListRegionsRequest in;
    RETURN_IF_ERROR(wire::DecodeMessage(request, &in));
    v1::ListRegionsResponse out;
    for (v1::RegionInfo& info : regions_.List(owner)) {
      *out.add_regions() = std::move(info);
    }
    response = wire::EncodeMessage(out);
    return absl::OkStatus();
  };
  const absl::Status status = run();
  answer(status, std::move(response));
}

}  // namespace gemm::server
