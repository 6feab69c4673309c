// Charts of a load run, drawn as SVG by gemm-client itself (`gemm-client
// load --plot PREFIX`), so that they come wherever the binary goes, with no
// Python or plotting library beside it:
//  - LatencyChartSvg: the latency histogram of OK jobs (log-scale buckets,
//    LoadReport.histogram_*), with p50, p99 and p99.9 marked;
//  - ThroughputChartSvg: OK jobs and errors per second of the measured part
//    (left axis) and p50 and p99 per second (right axis).
// Both are 800x450 and open in any browser.
//
// Thread-safety: stateless functions.
//
//   WriteTextFile(prefix + "-latency.svg", LatencyChartSvg(report));
#ifndef GEMM_CLIENT_CLI_LOAD_CHARTS_H_
#define GEMM_CLIENT_CLI_LOAD_CHARTS_H_

#include <string>

#include "client/cli/load_report.h"

namespace gemm::client {

std::string LatencyChartSvg(const LoadReport& report);
std::string ThroughputChartSvg(const LoadReport& report);

}  // namespace gemm::client

#endif  // GEMM_CLIENT_CLI_LOAD_CHARTS_H_
