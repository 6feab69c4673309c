// The flags of shared-memory and CUDA IPC regions (--regions,
// --max-region-bytes, ...), bound to a RegionRegistry::Options whose values
// are their defaults.
//
// Thread-safety: call while building the command line, on one thread.
//
//   RegionRegistry::Options regions;
//   AddRegionFlags(app, &regions);  // before app.parse()
#ifndef GEMM_SERVER_REGIONS_REGION_FLAGS_H_
#define GEMM_SERVER_REGIONS_REGION_FLAGS_H_

#include "CLI/CLI.hpp"
#include "server/regions/region_registry.h"

namespace gemm::server {

// `options` must outlive the parse.
void AddRegionFlags(CLI::App& app, RegionRegistry::Options* options);

}  // namespace gemm::server

#endif  // GEMM_SERVER_REGIONS_REGION_FLAGS_H_
