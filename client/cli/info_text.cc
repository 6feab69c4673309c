#include "client/cli/info_text.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gemm::client {

std::string FormatInfo(const std::string& server,
                       const v1::InfoResponse& info) {
  std::string out;
  absl::StrAppendFormat(&out, "server   %s (gemm-service %s)\n", server,
                        info.version());
  absl::StrAppendFormat(&out, "backend  %s\n", info.backend());
  for (const auto& d : info.devices()) {
    absl::StrAppendFormat(&out, "device   %s: %s", d.id(), d.name());
    if (d.memory_bytes() > 0) {
      absl::StrAppendFormat(&out, ", %.1f GiB",
                            d.memory_bytes() / double(1 << 30));
    }
    if (!d.compute_capability().empty()) {
      absl::StrAppendFormat(&out, ", sm %s", d.compute_capability());
    }
    if (!d.state().empty() && d.state() != "ok") {
      absl::StrAppendFormat(&out, ", %s", d.state());
    }
    if (d.check_mismatches() > 0) {
      absl::StrAppendFormat(&out, ", %u results failed their check",
                            d.check_mismatches());
    }
    out += "\n";
  }
  std::vector<std::string> kernels;
  for (const auto& k : info.kernel_details()) {
    kernels.push_back(k.precision() == "fp32"
                          ? k.name()
                          : absl::StrCat(k.name(), " (", k.precision(), ")"));
  }
  if (kernels.empty())
    kernels.assign(info.kernels().begin(), info.kernels().end());
  absl::StrAppendFormat(&out, "kernels  auto, %s\n",
                        absl::StrJoin(kernels, ", "));
  const auto& l = info.limits();
  absl::StrAppendFormat(
      &out,
      "limits   max_dim %u, max_job_bytes %u, max_message_bytes %u, "
      "max_queued_jobs %u, max_inflight_bytes %u, result_chunk_bytes %u\n",
      l.max_dim(), l.max_job_bytes(), l.max_message_bytes(),
      l.max_queued_jobs(), l.max_inflight_bytes(), l.result_chunk_bytes());
  absl::StrAppendFormat(
      &out, "regions  max_regions_per_client %u, region_idle_timeout %g s\n",
      l.max_regions_per_client(), l.region_idle_timeout_s());
  absl::StrAppendFormat(
      &out, "batching max_batch_size %u, max_queue_delay %u us\n",
      info.batching().max_batch_size(), info.batching().max_queue_delay_us());
  absl::StrAppendFormat(
      &out,
      "stats    jobs ok %u, failed %u, rejected %u; checked %u, check "
      "mismatches %u; up %.1f s\n",
      info.stats().jobs_ok(), info.stats().jobs_failed(),
      info.stats().jobs_rejected(), info.stats().jobs_checked(),
      info.stats().check_mismatches(), info.stats().uptime_s());
  return out;
}

}  // namespace gemm::client
