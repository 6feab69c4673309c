#include "server/rpc/gemm_service.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/heap_release.h"
#include "common/status_macros.h"
#include "proto/wire_codec.h"
#include "server/edge/client_identity.h"
#include "spdlog/spdlog.h"

namespace gemm::server {
namespace {

JobIntake::Options IntakeOptions(const GemmServiceImpl::Options& options,
                                 RegionRegistry* regions) {
  JobIntake::Options intake;
  intake.regions = regions;
  intake.limits = options.limits;
  intake.host_allocator = options.host_allocator;
  intake.client_shares.max_bytes_per_client =
      ClientInflightBytes(options.limits);
  intake.client_shares.max_jobs_per_client = options.limits.max_client_jobs;
  intake.metrics = options.metrics;
  return intake;
}

GemmStreamReactor::Options StreamOptions(
    const GemmServiceImpl::Options& options, GemmServiceImpl* service) {
  GemmStreamReactor::Options stream;
  stream.on_early_cancel = [service](
                               const std::string& peer,
                               std::chrono::system_clock::time_point began,
                               std::chrono::system_clock::time_point deadline) {
    service->NoteEarlyCancel(peer, began, deadline);
  };
  stream.result_chunk_bytes = options.limits.result_chunk_bytes;
  stream.coalesce_small_writes = options.coalesce_small_writes;
  stream.job_stall_timeout = options.limits.job_stall_timeout;
  stream.max_open_jobs = options.limits.max_open_jobs_per_stream;
  return stream;
}

UnaryReadGate::Options ReadGateOptions(
    const GemmServiceImpl::Options& options) {
  UnaryReadGate::Options gate;
  gate.max_reads_per_client = options.max_client_unary_reads;
  gate.max_waiting_per_client = options.limits.max_client_jobs;
  return gate;
}

}  // namespace

GemmServiceImpl::GemmServiceImpl(const Options& options, Executor* executor,
                                 BatchScheduler* scheduler)
    : options_(options),
      executor_(executor),
      scheduler_(scheduler),
      regions_(options.regions, executor),
      intake_(IntakeOptions(options, &regions_), executor, scheduler),
      stream_options_(StreamOptions(options, this)),
      read_gate_(ReadGateOptions(options)),
      cancel_flood_({.max_early_cancels = options.max_client_early_cancels,
                     .shut_out_for = options.shut_out_for}) {
  const absl::Duration stall = options.limits.job_stall_timeout;
  const absl::Duration idle = options.regions.idle_timeout;
  absl::Duration period = absl::Seconds(1);
  if (stall > absl::ZeroDuration()) period = std::min(period, stall / 4);
  if (idle > absl::ZeroDuration()) period = std::min(period, idle / 4);
  // Quick enough to see the server go quiet within half a second
  // (HeapReleaseSchedule).
  period = std::min(period, absl::Milliseconds(250));
  period = std::max(period, absl::Milliseconds(10));
  sweeper_ = std::thread([this, period, stall] {
    absl::Time last_trim = absl::Now();
    HeapReleaseSchedule release({}, absl::Now(), Activity());
    while (!stop_sweeping_.WaitForNotificationWithTimeout(period)) {
      const absl::Time now = absl::Now();
      if (stall > absl::ZeroDuration()) streams_.ExpireStalled(now);
      regions_.ExpireIdle(now);
      // Memory a burst (or an attack) leaves in malloc's heaps stays with
      // the process under the trim threshold (1 GiB, so that large jobs
      // reuse it while they run); it is given back, the threads' arenas'
      // tops included, when the server goes quiet (heap_release.h). While
      // jobs run, malloc_trim every 10 s gives back the main arena's top
      // and whole free pages.
      if (release.Due(now, Activity(), inflight_bytes() != 0)) {
        const uint64_t before = ResidentBytes();
        ReleaseFreeHeapMemory();
        spdlog::debug("free heap memory given back, RSS {} -> {} MiB",
                      before >> 20, ResidentBytes() >> 20);
        last_trim = now;
      }
      if (now - last_trim >= absl::Seconds(10)) {
        malloc_trim(0);
        last_trim = now;
      }
    }
  });
}

uint64_t GemmServiceImpl::Activity() const {
  const JobCounts& counts = intake_.counts();
  return counts.ok() + counts.failed() + counts.rejected();
}

GemmServiceImpl::~GemmServiceImpl() {
  stop_sweeping_.Notify();
  if (sweeper_.joinable()) sweeper_.join();
}

void GemmServiceImpl::ServeInfo(const grpc::CallbackServerContext& context,
                                const grpc::ByteBuffer& request,
                                Answer answer) {
  absl::Status status = Identify(context).status();
  // InfoRequest has no fields; its bytes must still be a message.
  v1::InfoRequest in;
  if (status.ok()) status = wire::DecodeMessage(request, &in);
  answer(status,
         status.ok() ? wire::EncodeMessage(Describe()) : grpc::ByteBuffer());
}

v1::InfoResponse GemmServiceImpl::Describe() const {
  v1::InfoResponse response;
  response.set_version(options_.version);
  response.set_backend(std::string(executor_->backend()));
  uint64_t mismatches = 0;
  for (const DeviceDescription& d : executor_->devices()) {
    v1::Device* device = response.add_devices();
    device->set_id(d.id);
    device->set_name(d.name);
    device->set_memory_bytes(d.memory_bytes);
    device->set_compute_capability(d.compute_capability);
    device->set_state(d.failure.empty() ? "ok"
                                        : absl::StrCat("failed: ", d.failure));
    device->set_check_mismatches(d.check_mismatches);
    mismatches += d.check_mismatches;
  }
  for (const std::string& name : executor_->kernels()) {
    response.add_kernels(name);
  }
  for (const KernelDescription& k : executor_->kernel_details()) {
    v1::KernelInfo* info = response.add_kernel_details();
    info->set_name(k.name);
    info->set_precision(std::string(PrecisionName(k.precision)));
    info->set_description(k.description);
  }
  const ServiceLimits& l = options_.limits;
  v1::Limits* limits = response.mutable_limits();
  limits->set_max_dim(l.max_dim);
  limits->set_max_job_bytes(l.max_job_bytes);
  limits->set_max_message_bytes(l.max_message_bytes);
  limits->set_max_queued_jobs(scheduler_->options().max_queued_jobs);
  limits->set_max_inflight_bytes(l.max_inflight_bytes);
  limits->set_result_chunk_bytes(l.result_chunk_bytes);
  limits->set_max_regions_per_client(regions_.options().max_regions_per_owner);
  limits->set_region_idle_timeout_s(
      absl::ToDoubleSeconds(regions_.options().idle_timeout));
  v1::ServerStats* stats = response.mutable_stats();
  const JobCounts& counts = intake_.counts();
  stats->set_jobs_ok(counts.ok());
  stats->set_jobs_failed(counts.failed());
  stats->set_jobs_rejected(counts.rejected());
  stats->set_jobs_checked(counts.checked());
  stats->set_check_mismatches(mismatches);
  stats->set_uptime_s(absl::ToDoubleSeconds(absl::Now() - start_time_));
  v1::Batching* batching = response.mutable_batching();
  batching->set_max_batch_size(scheduler_->options().max_batch_size);
  batching->set_max_queue_delay_us(
      absl::ToInt64Microseconds(scheduler_->options().max_queue_delay));
  return response;
}

void GemmServiceImpl::NoteEarlyCancel(
    const std::string& peer, std::chrono::system_clock::time_point began,
    std::chrono::system_clock::time_point deadline) {
  // No rule on how long after it began: under a flood gRPC ends the reset
  // calls seconds late.
  const auto wall = std::chrono::system_clock::now();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    const std::chrono::system_clock::duration slack =
        std::max<std::chrono::system_clock::duration>(
            std::chrono::milliseconds(250), (deadline - began) / 10);
    if (wall >= deadline - slack) return;
  }
  // By address whatever the authentication: it is the connections that go.
  const std::string client = ClientIdentityOfPeer(peer);
  const absl::Time now = absl::Now();
  if (!cancel_flood_.OnEarlyCancel(client, now)) return;
  const size_t closed =
      options_.shut_out ? options_.shut_out(client, now + options_.shut_out_for)
                        : 0;
  spdlog::warn(
      "client {} cancelled more than {} calls before their requests were read "
      "(--max-client-early-cancels; an HTTP/2 rapid reset?): {}",
      QuoteClientText(client), options_.max_client_early_cancels,
      options_.shut_out
          ? absl::StrCat("closed its ", closed,
                         " connection(s), refusing new ones for ",
                         absl::FormatDuration(options_.shut_out_for))
          : std::string("this listener cannot shut it out"));
}

absl::StatusOr<std::string> GemmServiceImpl::Identify(
    const grpc::CallbackServerContext& context) const {
  if (options_.authenticator == nullptr) {
    return ClientIdentityOfPeer(context.peer());
  }
  absl::StatusOr<std::string> identity =
      options_.authenticator->Identify(context);
  if (identity.ok() && options_.claim_connection) {
    RETURN_IF_ERROR(options_.claim_connection(context.peer(), *identity));
  }
  return identity;
}

void GemmServiceImpl::Drain() {
  read_gate_.RefuseAll(absl::UnavailableError(
      "the server is shutting down; the request was not read"));
  // Streams waiting for room try again, and now fail.
  intake_.NotifyCapacity();
  streams_.DrainAll();
}

}  // namespace gemm::server
