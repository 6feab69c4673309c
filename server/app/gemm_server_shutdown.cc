// GemmServer's graceful shutdown (gemm_server.h): health NOT_SERVING for
// the drain delay, no new jobs or connections, open calls given the rest of
// the grace period, then the scheduler stopped.
#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "server/app/gemm_server.h"
#include "spdlog/spdlog.h"

namespace gemm::server {

GemmServer::~GemmServer() { Shutdown(absl::ZeroDuration()); }

std::string GemmServer::ShutdownReport::ToString() const {
  if (clean()) return "every call ended within the grace period";
  return absl::StrCat("grace period over: cancelled ", cancelled_streams,
                      " open stream(s) and ", cancelled_unary_calls,
                      " unary call(s); ", cancelled_queued_jobs,
                      " queued job(s) dropped unrun");
}

GemmServer::ShutdownReport GemmServer::Shutdown(absl::Duration grace,
                                                absl::Duration drain_delay) {
  ShutdownReport report;
  if (shut_down_) return report;
  shut_down_ = true;
  const absl::Time deadline =
      absl::Now() + std::max(grace, absl::ZeroDuration());
  if (server_ != nullptr) {
    health_->SetServingStatus(false);
    if (drain_delay > absl::ZeroDuration()) {
      absl::SleepFor(std::min(drain_delay, grace));
    }
  }
  // A server whose Create() failed part-way may lack a scheduler.
  if (scheduler_ != nullptr) scheduler_->StopAccepting();
  if (service_ != nullptr) service_->Drain();
  // No new connections from here on, as with gRPC's own listener.
  if (acceptor_ != nullptr) acceptor_->Stop();
  if (server_ != nullptr) {
    // gRPC cancels exactly the calls open when the deadline passes: count
    // them then.
    absl::Notification ended;
    std::thread watch([&] {
      if (ended.WaitForNotificationWithDeadline(deadline)) return;
      // gRPC's Shutdown first takes every acceptor's lock, which a
      // hand-off holds while its client floods it: end those, so that
      // Shutdown can go on to cancel what is left.
      if (acceptor_ != nullptr) {
        const size_t aborted = acceptor_->AbortHandoffs();
        if (aborted > 0) {
          spdlog::warn(
              "shutdown: closed {} connection(s) still being handed to gRPC "
              "(a client that never stopped sending)",
              aborted);
        }
      }
      report.cancelled_streams = service_->open_streams();
      report.cancelled_unary_calls = service_->open_unary_calls();
      if (scheduler_ != nullptr) {
        report.cancelled_queued_jobs = scheduler_->queued();
      }
    });
    // Health watches would hold the shutdown until the deadline.
    health_->Shutdown();
    // Waits for open calls, whose accepted jobs keep running meanwhile.
    server_->Shutdown(absl::ToChronoTime(deadline));
    ended.Notify();
    watch.join();
    spdlog::debug("shutdown: every call ended ({} s before the deadline)",
                  absl::ToDoubleSeconds(deadline - absl::Now()));
  }
  if (scheduler_ != nullptr) scheduler_->Stop();
  spdlog::debug("shutdown: scheduler stopped");
  if (server_ != nullptr) server_->Wait();
  return report;
}

}  // namespace gemm::server
