// The flags of the service's limits (--max-job-bytes, --max-inflight-bytes,
// --check-min-gflop, ...), bound to a ServiceLimits whose values are their
// defaults.
//
// Thread-safety: call while building the command line, on one thread.
//
//   ServiceLimits limits;
//   AddServiceLimitsFlags(app, &limits);  // before app.parse()
#ifndef GEMM_SERVER_ADMISSION_LIMITS_FLAGS_H_
#define GEMM_SERVER_ADMISSION_LIMITS_FLAGS_H_

#include "CLI/CLI.hpp"
#include "server/admission/validation.h"

namespace gemm::server {

// `limits` must outlive the parse.
void AddServiceLimitsFlags(CLI::App& app, ServiceLimits* limits);

}  // namespace gemm::server

#endif  // GEMM_SERVER_ADMISSION_LIMITS_FLAGS_H_
