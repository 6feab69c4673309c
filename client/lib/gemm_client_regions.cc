// GemmClient's shared-memory region calls (gemm_client.h): registration
// goes to every target's server, since jobs rotate over them.
#include "absl/strings/str_cat.h"
#include "client/lib/gemm_client.h"
#include "client/lib/grpc_status.h"

namespace gemm::client {

std::vector<GemmClient::Channel*> GemmClient::ChannelPerTarget() {
  std::vector<Channel*> out;
  for (Channel& channel : channels_) {
    bool seen = false;
    for (const Channel* c : out) seen = seen || c->target == channel.target;
    if (!seen) out.push_back(&channel);
  }
  return out;
}

absl::StatusOr<v1::RegionInfo> GemmClient::RegisterRegion(
    const v1::RegisterRegionRequest& request) {
  v1::RegionInfo info;
  std::vector<Channel*> registered;
  for (Channel* channel : ChannelPerTarget()) {
    grpc::ClientContext context;
    ApplyDeadline(&context);
    v1::RegisterRegionResponse response;
    grpc::Status status =
        channel->stub->RegisterRegion(&context, request, &response);
    if (!status.ok()) {
      for (Channel* undo : registered) {
        grpc::ClientContext undo_context;
        ApplyDeadline(&undo_context);
        v1::UnregisterRegionRequest forget;
        forget.set_name(request.name());
        v1::UnregisterRegionResponse ignored;
        undo->stub->UnregisterRegion(&undo_context, forget, &ignored);
      }
      absl::Status refused = FromGrpcStatus(status);
      return absl::Status(refused.code(), absl::StrCat(channel->target, ": ",
                                                       refused.message()));
    }
    registered.push_back(channel);
    info = response.region();
  }
  return info;
}

absl::Status GemmClient::UnregisterRegion(const std::string& name) {
  absl::Status first_error;
  int found = 0;
  for (Channel* channel : ChannelPerTarget()) {
    grpc::ClientContext context;
    ApplyDeadline(&context);
    v1::UnregisterRegionRequest request;
    request.set_name(name);
    v1::UnregisterRegionResponse response;
    grpc::Status status =
        channel->stub->UnregisterRegion(&context, request, &response);
    if (status.ok()) {
      ++found;
    } else if (status.error_code() != grpc::StatusCode::NOT_FOUND &&
               first_error.ok()) {
      first_error = FromGrpcStatus(status);
    }
  }
  if (!first_error.ok()) return first_error;
  if (found == 0) {
    return absl::NotFoundError(
        absl::StrCat("no server has a region '", name, "' of this caller"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::RegionInfo>> GemmClient::ListRegions() {
  grpc::ClientContext context;
  ApplyDeadline(&context);
  v1::ListRegionsResponse response;
  grpc::Status status = NextChannel().stub->ListRegions(
      &context, v1::ListRegionsRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return std::vector<v1::RegionInfo>(response.regions().begin(),
                                     response.regions().end());
}

}  // namespace gemm::client
