#include "client/cli/load_charts.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gemm::client {
namespace {

constexpr double kWidth = 800, kHeight = 450;
// The plot area.
constexpr double kLeft = 70, kRight = 730, kTop = 40, kBottom = 390;

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Text(double x, double y, const std::string& text,
                 const char* anchor = "middle", int size = 11) {
  return absl::StrFormat(
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\">%s"
      "</text>\n",
      x, y, size, anchor, Escape(text));
}

std::string Line(double x1, double y1, double x2, double y2,
                 const char* style) {
  return absl::StrFormat(
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" %s/>\n", x1, y1,
      x2, y2, style);
}

// A short label for an axis value: 0.0123, 1.5, 250, 12k.
std::string Label(double v) {
  if (v >= 10000) return absl::StrFormat("%.0fk", v / 1000);
  if (v >= 100) return absl::StrFormat("%.0f", v);
  if (v >= 1) return absl::StrFormat("%.3g", v);
  return absl::StrFormat("%.2g", v);
}

// A rounded top for a linear axis from 0 to `max`.
double NiceTop(double max) {
  if (max <= 0) return 1;
  const double step = std::pow(10, std::floor(std::log10(max)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * step >= max) return m * step;
  }
  return 10 * step;
}

std::string Open(const std::string& title) {
  return absl::StrCat(
      absl::StrFormat("<svg xmlns=\"http://www.w3.org/2000/svg\" "
                      "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f "
                      "%.0f\" font-family=\"sans-serif\">\n",
                      kWidth, kHeight, kWidth, kHeight),
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      Text(kWidth / 2, 22, title, "middle", 13),
      Line(kLeft, kBottom, kRight, kBottom, "stroke=\"black\""),
      Line(kLeft, kTop, kLeft, kBottom, "stroke=\"black\""));
}

// Five ticks up a linear axis from 0 to `top`, at x (left or right side).
std::string YTicks(double top, double x, bool right) {
  std::string out;
  for (int i = 0; i <= 4; ++i) {
    const double y = kBottom - (kBottom - kTop) * i / 4;
    out += Line(x, y, x + (right ? 4 : -4), y, "stroke=\"black\"");
    out += Text(x + (right ? 7 : -7), y + 4, Label(top * i / 4),
                right ? "start" : "end");
  }
  return out;
}

std::string RunTitle(const LoadReport& r) {
  return absl::StrCat(r.shapes, ", ",
                      r.mode == "rate"
                          ? absl::StrFormat("rate %.0f/s", r.rate)
                          : absl::StrCat("concurrency ", r.concurrency),
                      ", ", r.connections, " connection(s)");
}

std::string Polyline(const std::vector<double>& xs,
                     const std::vector<double>& ys, const char* style) {
  std::vector<std::string> points;
  for (size_t i = 0; i < xs.size(); ++i) {
    points.push_back(absl::StrFormat("%.1f,%.1f", xs[i], ys[i]));
  }
  return absl::StrCat("<polyline fill=\"none\" ", style, " points=\"",
                      absl::StrJoin(points, " "), "\"/>\n");
}

}  // namespace

std::string LatencyChartSvg(const LoadReport& r) {
  std::string out =
      Open(absl::StrCat("Latency of ", r.ok, " OK jobs: ", RunTitle(r)));
  const size_t n = r.histogram_count.size();
  if (n == 0 || r.histogram_upper_ms.size() != n) {
    out += Text(kWidth / 2, kHeight / 2, "no OK jobs");
    return out + "</svg>\n";
  }
  // Buckets are even on a log scale: each is as wide as the next.
  const double ratio =
      n > 1 ? r.histogram_upper_ms[1] / r.histogram_upper_ms[0] : 2.0;
  const double lo = std::log(r.histogram_upper_ms[0] / ratio);
  const double hi = std::log(r.histogram_upper_ms[n - 1]);
  auto x_of = [&](double ms) {
    const double at = (std::log(std::max(ms, 1e-9)) - lo) / (hi - lo);
    return kLeft + (kRight - kLeft) * std::clamp(at, 0.0, 1.0);
  };
  const double top = NiceTop(static_cast<double>(
      *std::max_element(r.histogram_count.begin(), r.histogram_count.end())));
  out += YTicks(top, kLeft, false);
  for (size_t i = 0; i < n; ++i) {
    const double x0 = x_of(r.histogram_upper_ms[i] / ratio);
    const double x1 = x_of(r.histogram_upper_ms[i]);
    const double h = (kBottom - kTop) * r.histogram_count[i] / top;
    out += absl::StrFormat(
        "<rect class=\"bucket\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
        "height=\"%.1f\" fill=\"steelblue\"><title>%s..%s ms: %d</title>"
        "</rect>\n",
        x0, kBottom - h, std::max(x1 - x0 - 0.5, 0.5), h,
        Label(r.histogram_upper_ms[i] / ratio), Label(r.histogram_upper_ms[i]),
        r.histogram_count[i]);
  }
  // Decades (and their 2x and 5x) along the log axis.
  for (double decade = std::pow(10, std::floor(lo / std::log(10)));
       std::log(decade) <= hi; decade *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double ms = decade * m;
      if (std::log(ms) < lo || std::log(ms) > hi) continue;
      out += Line(x_of(ms), kBottom, x_of(ms), kBottom + 4, "stroke=\"black\"");
      out += Text(x_of(ms), kBottom + 16, Label(ms));
    }
  }
  const std::pair<const char*, double> marks[] = {{"p50", r.latency_ms.p50},
                                                  {"p99", r.latency_ms.p99},
                                                  {"p99.9", r.latency_ms.p999}};
  for (const auto& [name, ms] : marks) {
    out += Line(x_of(ms), kTop, x_of(ms), kBottom,
                "stroke=\"gray\" stroke-dasharray=\"4 3\"");
    out += Text(x_of(ms) + 3, kTop + 12, absl::StrCat(name, " ", Label(ms)),
                "start", 10);
  }
  out += Text((kLeft + kRight) / 2, kBottom + 36,
              "client end-to-end latency (ms, log scale)");
  out += Text(18, (kTop + kBottom) / 2, "jobs");
  return out + "</svg>\n";
}

std::string ThroughputChartSvg(const LoadReport& r) {
  std::string out = Open(absl::StrCat("Throughput over time: ", RunTitle(r)));
  if (r.timeline.empty()) {
    out += Text(kWidth / 2, kHeight / 2, "no measured second");
    return out + "</svg>\n";
  }
  double most_jobs = 0, most_ms = 0;
  for (const LoadReport::Second& s : r.timeline) {
    most_jobs = std::max({most_jobs, double(s.ok), double(s.errors)});
    most_ms = std::max({most_ms, s.p50_ms, s.p99_ms});
  }
  const double jobs_top = NiceTop(most_jobs), ms_top = NiceTop(most_ms);
  const double last = std::max(1.0, r.timeline.back().t_s);
  std::vector<double> xs, ok, errors, p50, p99;
  for (const LoadReport::Second& s : r.timeline) {
    xs.push_back(kLeft + (kRight - kLeft) * s.t_s / last);
    auto y = [](double v, double top) {
      return kBottom - (kBottom - kTop) * v / top;
    };
    ok.push_back(y(s.ok, jobs_top));
    errors.push_back(y(s.errors, jobs_top));
    p50.push_back(y(s.p50_ms, ms_top));
    p99.push_back(y(s.p99_ms, ms_top));
  }
  out += Line(kRight, kTop, kRight, kBottom, "stroke=\"black\"");
  out += YTicks(jobs_top, kLeft, false);
  out += YTicks(ms_top, kRight, true);
  for (int i = 0; i <= 4; ++i) {
    const double t = last * i / 4;
    const double x = kLeft + (kRight - kLeft) * i / 4;
    out += Line(x, kBottom, x, kBottom + 4, "stroke=\"black\"");
    out += Text(x, kBottom + 16, Label(t));
  }
  out +=
      Polyline(xs, ok, "class=\"ok\" stroke=\"steelblue\" stroke-width=\"2\"");
  out += Polyline(xs, errors, "class=\"errors\" stroke=\"orange\"");
  out += Polyline(xs, p50,
                  "class=\"p50\" stroke=\"green\" stroke-dasharray=\"2 2\"");
  out += Polyline(xs, p99,
                  "class=\"p99\" stroke=\"red\" stroke-dasharray=\"2 2\"");
  const std::pair<const char*, const char*> legend[] = {
      {"steelblue", "OK jobs/s"},
      {"orange", "errors/s"},
      {"green", "p50 ms (right)"},
      {"red", "p99 ms (right)"}};
  double lx = kLeft + 10;
  for (const auto& [color, name] : legend) {
    out += absl::StrFormat(
        "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"3\" "
        "fill=\"%s\"/>\n",
        lx, kTop + 6, color);
    out += Text(lx + 16, kTop + 11, name, "start", 10);
    lx += 130;
  }
  out +=
      Text((kLeft + kRight) / 2, kBottom + 36, "second of the measured part");
  out += Text(18, (kTop + kBottom) / 2, "jobs/s");
  out += Text(kWidth - 14, (kTop + kBottom) / 2, "ms");
  return out + "</svg>\n";
}

}  // namespace gemm::client
