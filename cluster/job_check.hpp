#pragma once
/// What `troupe launch` and every `troupe node` check before any process starts: the config
/// parsed for the manifest's world size, against the data, the teacher, and the manifest's
/// fault policy and transport.

#include <string>

#include "cluster/manifest.hpp"
#include "io/config/job_config.hpp"

namespace troupe::cluster {

/// Loads `config_file` for `manifest`'s world and checks it; throws troupe::error naming the
/// file and field otherwise.
io::job_config check_job(const cluster_manifest& manifest, const std::string& config_file);

}  // namespace troupe::cluster
