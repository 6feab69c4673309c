#include "client/cli/load_generator.h"

#include <set>
#include <string>

#include "client/cli/load_run.h"

namespace gemm::client {

absl::StatusOr<LoadReport> RunLoad(GemmClient* client,
                                   const LoadOptions& options) {
  if (options.shapes.empty()) {
    return absl::InvalidArgumentError("shapes: no shape given");
  }
  if (options.rate < 0 || (options.rate == 0 && options.concurrency < 1)) {
    return absl::InvalidArgumentError(
        "need a rate > 0, or a concurrency >= 1 without a rate");
  }
  if (!(options.unary_share >= 0 && options.unary_share <= 1)) {
    return absl::InvalidArgumentError("unary_share: must be in [0, 1]");
  }
  if (options.count == 0 && options.duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("need a count or a duration");
  }
  // With one server, its own counters tell whether every job the client
  // sent was seen there (assuming no other client uses it meanwhile).
  std::unique_ptr<JobRegion> region;
  if (options.memory != OperandMemory::kMessages) {
    absl::StatusOr<std::unique_ptr<JobRegion>> made = JobRegion::Create(
        client, options.memory, LoadRun::RegionBytes(options));
    if (!made.ok()) return made.status();
    region = std::move(*made);
  }
  absl::StatusOr<v1::InfoResponse> before = client->Info();
  LoadRun run(client, options, region.get());
  LoadReport report = run.Run();
  std::set<std::string> distinct(report.targets.begin(), report.targets.end());
  absl::StatusOr<v1::InfoResponse> after = client->Info();
  if (distinct.size() == 1 && before.ok() && after.ok() &&
      before->has_stats() && after->has_stats()) {
    report.have_server_counts = true;
    report.server_jobs_ok =
        after->stats().jobs_ok() - before->stats().jobs_ok();
    report.server_jobs_failed =
        after->stats().jobs_failed() - before->stats().jobs_failed();
    report.server_jobs_rejected =
        after->stats().jobs_rejected() - before->stats().jobs_rejected();
    report.server_jobs_checked =
        after->stats().jobs_checked() - before->stats().jobs_checked();
    report.server_check_mismatches =
        after->stats().check_mismatches() - before->stats().check_mismatches();
  }
  return report;
}

}  // namespace gemm::client
