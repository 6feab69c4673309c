#include "server/regions/region_flags.h"

#include <map>
#include <string>

#include "common/cli_options.h"

namespace gemm::server {

void AddRegionFlags(CLI::App& app, RegionRegistry::Options* options) {
  using Registrants = RegionRegistry::Registrants;
  const std::string group = "Regions";
  const std::map<std::string, Registrants> registrants = {
      {"local", Registrants::kLocal},
      {"any", Registrants::kAny},
      {"off", Registrants::kNone}};
  std::string shown;
  for (const auto& [name, value] : registrants) {
    if (value == options->registrants) shown = name;
  }
  app.add_option("--regions", options->registrants,
                 "who may register shared-memory regions: local (callers at "
                 "a loopback address or on a Unix socket), any (any address: "
                 "containers on one host) or off")
      ->transform(CLI::CheckedTransformer(registrants))
      ->default_str(shown)
      ->group(group);
  app.add_option("--region-key-prefix", options->key_prefix,
                 "the server opens only shared-memory objects whose names "
                 "start with this")
      ->capture_default_str()
      ->group(group);
  app.add_option("--max-region-bytes", options->max_system_bytes,
                 "bytes of all shared-memory regions together (0: half the "
                 "host's physical memory)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--max-regions-per-client", options->max_regions_per_owner,
                 "shared-memory regions one client may have registered at "
                 "once")
      ->capture_default_str()
      ->group(group);
  AddSecondsOption(app, "--region-idle-timeout-s", &options->idle_timeout,
                   "a region no job or call of its owner used for this long "
                   "is unregistered by the server (0: never)")
      ->group(group);
}

}  // namespace gemm::server
