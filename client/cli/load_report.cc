#include "client/cli/load_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace gemm::client {
namespace {

// Keys stay in the order written, as readers of the report expect.
using Json = nlohmann::ordered_json;

Json DistributionJson(const Distribution& d) {
  return Json{{"count", d.count}, {"min", d.min},   {"mean", d.mean},
              {"p50", d.p50},     {"p90", d.p90},   {"p95", d.p95},
              {"p99", d.p99},     {"p999", d.p999}, {"max", d.max}};
}

template <typename Map>
Json MapJson(const Map& map) {
  Json out = Json::object();
  for (const auto& [key, value] : map) out[key] = value;
  return out;
}

}  // namespace

double NearestRankPercentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  // The epsilon keeps 99.9% of 1000 at rank 999 despite rounding.
  size_t rank =
      static_cast<size_t>(std::ceil(p / 100.0 * sorted.size() - 1e-9));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

Distribution Summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = values.size();
  d.min = values.front();
  d.max = values.back();
  double sum = 0;
  for (double v : values) sum += v;
  d.mean = sum / values.size();
  d.p50 = NearestRankPercentile(values, 50);
  d.p90 = NearestRankPercentile(values, 90);
  d.p95 = NearestRankPercentile(values, 95);
  d.p99 = NearestRankPercentile(values, 99);
  d.p999 = NearestRankPercentile(values, 99.9);
  return d;
}

bool ServerCountsAgree(const LoadReport& r) {
  if (!r.have_server_counts) return false;
  const uint64_t server_total =
      r.server_jobs_ok + r.server_jobs_failed + r.server_jobs_rejected;
  if (server_total != r.server_side_jobs) return false;
  return r.server_side_jobs != r.sent || r.server_jobs_ok == r.answered_ok;
}

std::string FormatReportText(const LoadReport& r) {
  std::string out;
  const std::string load =
      r.mode == "rate"
          ? absl::StrFormat(
                "rate %.1f/s (%s arrivals%s)", r.rate, r.arrivals,
                r.concurrency > 0
                    ? absl::StrCat(", at most ", r.concurrency, " outstanding")
                    : "")
          : absl::StrFormat("concurrency %d (closed loop)", r.concurrency);
  absl::StrAppendFormat(
      &out, "Load: %s over %d connection(s) (%d streams) to %s\n", load,
      r.connections, r.streams, absl::StrJoin(r.targets, ", "));
  absl::StrAppendFormat(
      &out, "Shapes %s, kernel %s; warm-up %.1f s (%d jobs, not counted)\n\n",
      r.shapes, r.kernel, r.warmup_s, r.warmup_jobs);
  absl::StrAppendFormat(&out, "Summary\n");
  absl::StrAppendFormat(&out, "  count         %d (ok %d, errors %d)\n",
                        r.count, r.ok, r.errors);
  absl::StrAppendFormat(&out, "  duration      %.2f s\n", r.duration_s);
  absl::StrAppendFormat(&out, "  requests/s    %.1f\n", r.requests_per_s);
  absl::StrAppendFormat(&out, "  GFLOP/s       %.2f\n", r.gflops);
  absl::StrAppendFormat(&out, "  MB/s in       %.2f (operands sent)\n",
                        r.mb_per_s_in);
  absl::StrAppendFormat(&out, "  MB/s out      %.2f (results received)\n",
                        r.mb_per_s_out);
  std::vector<std::string> calls;
  for (const auto& [call, count] : r.sent_by_call) {
    if (count > 0) calls.push_back(absl::StrCat(call, " ", count));
  }
  const uint64_t answered = r.answered_ok + r.answered_errors;
  absl::StrAppendFormat(
      &out, "  whole run     sent %d (%s), answered %d (ok %d, errors %d)%s\n",
      r.sent, absl::StrJoin(calls, ", "), answered, r.answered_ok,
      r.answered_errors,
      answered < r.sent ? absl::StrCat("; ", r.sent - answered, " LOST") : "");
  if (r.have_server_counts) {
    const uint64_t server_total =
        r.server_jobs_ok + r.server_jobs_failed + r.server_jobs_rejected;
    const uint64_t client_total = r.warmup_jobs + r.count;
    absl::StrAppendFormat(
        &out,
        "  server counts %d jobs (ok %d, failed %d, rejected %d) for the "
        "client's %d (%d warm-up + %d measured%s): %s\n",
        server_total, r.server_jobs_ok, r.server_jobs_failed,
        r.server_jobs_rejected, client_total, r.warmup_jobs, r.count,
        r.server_side_jobs != client_total
            ? absl::StrCat("; ", r.server_side_jobs, " parts with --split")
            : "",
        ServerCountsAgree(r) ? "agree" : "DISAGREE");
  }
  absl::StrAppendFormat(&out, "\nErrors by status code\n");
  if (r.errors_by_code.empty()) absl::StrAppendFormat(&out, "  none\n");
  for (const auto& [code, count] : r.errors_by_code) {
    auto sample = r.error_sample.find(code);
    absl::StrAppendFormat(&out, "  %-19s %d  (e.g. \"%s\")\n", code, count,
                          sample == r.error_sample.end() ? "" : sample->second);
  }
  const Distribution& l = r.latency_ms;
  absl::StrAppendFormat(&out,
                        "\nLatency, client end to end, OK jobs (ms)\n"
                        "  min %.3f  mean %.3f  p50 %.3f  p90 %.3f  p95 %.3f  "
                        "p99 %.3f  p99.9 %.3f  max %.3f\n",
                        l.min, l.mean, l.p50, l.p90, l.p95, l.p99, l.p999,
                        l.max);
  absl::StrAppendFormat(&out,
                        "\nServer-side breakdown, OK jobs (ms)   mean       "
                        "p99\n");
  auto row = [&out](const char* name, const Distribution& d) {
    absl::StrAppendFormat(&out, "  %-32s %9.3f %9.3f\n", name, d.mean, d.p99);
  };
  row("queued", r.queue_ms);
  row("upload (h2d)", r.h2d_ms);
  row("compute", r.compute_ms);
  row("download (d2h)", r.d2h_ms);
  row("server total", r.server_ms);
  absl::StrAppendFormat(&out, "  %-32s %9.2f\n", "mean batch size",
                        r.mean_batch_size);
  absl::StrAppendFormat(&out, "  %-32s %9.3f\n", "network + client (mean)",
                        r.latency_ms.mean - r.server_ms.mean);
  absl::StrAppendFormat(&out, "\nPer target\n");
  for (const auto& [target, ok] : r.ok_by_target) {
    auto errors = r.errors_by_target.find(target);
    absl::StrAppendFormat(
        &out, "  %-24s ok %d, errors %d\n", target, ok,
        errors == r.errors_by_target.end() ? 0 : errors->second);
  }
  absl::StrAppendFormat(&out, "\nPer device (from the server's timing)\n");
  for (const auto& [device, ok] : r.ok_by_device) {
    absl::StrAppendFormat(&out, "  %-24s ok %d\n", device, ok);
  }
  absl::StrAppendFormat(&out,
                        "\nPer shape                   jobs   latency of OK "
                        "jobs (ms): p50     p90     p99   p99.9\n");
  for (const auto& [shape, count] : r.count_by_shape) {
    auto latency = r.latency_ms_by_shape.find(shape);
    const Distribution d = latency == r.latency_ms_by_shape.end()
                               ? Distribution()
                               : latency->second;
    absl::StrAppendFormat(&out, "  %-24s %6d %31.3f %7.3f %7.3f %7.3f\n", shape,
                          count, d.p50, d.p90, d.p99, d.p999);
  }
  if (r.verified > 0 || r.verify_failures > 0) {
    absl::StrAppendFormat(&out,
                          "\nVerified %d results (of %d answered OK), %d "
                          "failed\n",
                          r.verified, r.answered_ok, r.verify_failures);
  }
  if (r.checked > 0 || r.server_check_mismatches > 0) {
    absl::StrAppendFormat(
        &out,
        "\nResult check (ABFT): %d results checked, check median %.3f ms "
        "(compute median %.3f ms), %d failed runs replaced",
        r.checked, r.check_ms.p50, r.compute_ms.p50, r.check_mismatches);
    if (r.have_server_counts) {
      absl::StrAppendFormat(&out, "; server: %d checked, %d mismatches",
                            r.server_jobs_checked, r.server_check_mismatches);
    }
    absl::StrAppendFormat(&out, "\n");
  }
  if (r.stream_restarts > 0) {
    absl::StrAppendFormat(&out, "\nStreams reopened after breaking: %d\n",
                          r.stream_restarts);
  }
  return out;
}

std::string FormatReportJson(const LoadReport& r) {
  Json out;
  out["mode"] = r.mode;
  out["targets"] = r.targets;
  out["connections"] = r.connections;
  out["streams"] = r.streams;
  out["concurrency"] = r.concurrency;
  out["rate"] = r.rate;
  out["arrivals"] = r.arrivals;
  out["shapes"] = r.shapes;
  out["kernel"] = r.kernel;
  out["warmup_s"] = r.warmup_s;
  out["warmup_jobs"] = r.warmup_jobs;
  out["sent"] = r.sent;
  out["sent_by_call"] = MapJson(r.sent_by_call);
  out["answered_ok"] = r.answered_ok;
  out["answered_errors"] = r.answered_errors;
  out["server_side_jobs"] = r.server_side_jobs;
  if (r.have_server_counts) {
    out["server_jobs_ok"] = r.server_jobs_ok;
    out["server_jobs_failed"] = r.server_jobs_failed;
    out["server_jobs_rejected"] = r.server_jobs_rejected;
    out["server_counts_agree"] = ServerCountsAgree(r);
    out["server_jobs_checked"] = r.server_jobs_checked;
    out["server_check_mismatches"] = r.server_check_mismatches;
  }
  out["duration_s"] = r.duration_s;
  out["count"] = r.count;
  out["ok"] = r.ok;
  out["errors"] = r.errors;
  out["errors_by_code"] = MapJson(r.errors_by_code);
  out["error_sample"] = MapJson(r.error_sample);
  out["requests_per_s"] = r.requests_per_s;
  out["gflops"] = r.gflops;
  out["mb_per_s_in"] = r.mb_per_s_in;
  out["mb_per_s_out"] = r.mb_per_s_out;
  out["latency_ms"] = DistributionJson(r.latency_ms);
  out["server_ms"] = Json{{"queued", DistributionJson(r.queue_ms)},
                          {"h2d", DistributionJson(r.h2d_ms)},
                          {"compute", DistributionJson(r.compute_ms)},
                          {"d2h", DistributionJson(r.d2h_ms)},
                          {"total", DistributionJson(r.server_ms)},
                          {"mean_batch_size", r.mean_batch_size}};
  out["ok_by_target"] = MapJson(r.ok_by_target);
  out["errors_by_target"] = MapJson(r.errors_by_target);
  out["ok_by_device"] = MapJson(r.ok_by_device);
  out["count_by_shape"] = MapJson(r.count_by_shape);
  Json by_shape = Json::object();
  for (const auto& [shape, d] : r.latency_ms_by_shape) {
    by_shape[shape] = DistributionJson(d);
  }
  out["latency_ms_by_shape"] = by_shape;
  out["checked"] = r.checked;
  out["check_mismatches"] = r.check_mismatches;
  out["check_ms"] = DistributionJson(r.check_ms);
  out["verified"] = r.verified;
  out["verify_failures"] = r.verify_failures;
  out["stream_restarts"] = r.stream_restarts;
  out["histogram"] =
      Json{{"upper_ms", r.histogram_upper_ms}, {"count", r.histogram_count}};
  Json timeline = Json::array();
  for (const LoadReport::Second& s : r.timeline) {
    timeline.push_back(Json{{"t_s", static_cast<int64_t>(s.t_s)},
                            {"ok", s.ok},
                            {"errors", s.errors},
                            {"p50_ms", s.p50_ms},
                            {"p99_ms", s.p99_ms},
                            {"gflops", s.gflops}});
  }
  out["timeline"] = std::move(timeline);
  // Invalid UTF-8 in a server's error message is replaced, not thrown on.
  return out.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string FormatReportCsv(const LoadReport& r) {
  std::string header =
      "mode,connections,concurrency,rate,arrivals,shapes,kernel,duration_s,"
      "count,ok,errors,errors_by_code,requests_per_s,gflops,mb_per_s_in,"
      "mb_per_s_out,latency_min_ms,latency_mean_ms,latency_p50_ms,"
      "latency_p90_ms,latency_p95_ms,latency_p99_ms,latency_p999_ms,"
      "latency_max_ms,queued_mean_ms,queued_p99_ms,h2d_mean_ms,h2d_p99_ms,"
      "compute_mean_ms,compute_p99_ms,d2h_mean_ms,d2h_p99_ms,"
      "server_mean_ms,server_p99_ms,verify_failures\n";
  std::vector<std::string> codes;
  for (const auto& [code, count] : r.errors_by_code) {
    codes.push_back(absl::StrCat(code, "=", count));
  }
  const Distribution& l = r.latency_ms;
  std::string row = absl::StrFormat(
      "%s,%d,%d,%.6g,%s,\"%s\",%s,%.6g,%d,%d,%d,\"%s\",%.6g,%.6g,%.6g,%.6g,"
      "%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,"
      "%.6g,%.6g,%.6g,%.6g,%d\n",
      r.mode, r.connections, r.concurrency, r.rate, r.arrivals, r.shapes,
      r.kernel, r.duration_s, r.count, r.ok, r.errors,
      absl::StrJoin(codes, ";"), r.requests_per_s, r.gflops, r.mb_per_s_in,
      r.mb_per_s_out, l.min, l.mean, l.p50, l.p90, l.p95, l.p99, l.p999, l.max,
      r.queue_ms.mean, r.queue_ms.p99, r.h2d_ms.mean, r.h2d_ms.p99,
      r.compute_ms.mean, r.compute_ms.p99, r.d2h_ms.mean, r.d2h_ms.p99,
      r.server_ms.mean, r.server_ms.p99, r.verify_failures);
  return header + row;
}

std::string FormatProgressLine(const LoadProgress& p, bool terminal) {
  return absl::StrFormat(
      "%s[%5.0f s]%s sent %d, done %d, errors %d, in flight %d | last 1 s: "
      "%.0f ok/s, p50 %.3f ms, p99 %.3f ms%s",
      terminal ? "\r" : "", p.elapsed_s, p.warming_up ? " warm-up" : "", p.sent,
      p.completed, p.errors, p.in_flight, p.last_second_rps,
      p.last_second_p50_ms, p.last_second_p99_ms, terminal ? "\033[K" : "\n");
}

}  // namespace gemm::client
