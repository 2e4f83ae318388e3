#pragma once
/// RUN_DIR/job.json: what the dashboard shows of a job (name, run directory, steps, world, the
/// config as given, when it started). The metrics hub writes it when it starts; `troupe
/// dashboard RUN_DIR` reads it to serve a finished run.

#include <filesystem>

#include "io/monitor/metrics_store.hpp"

namespace troupe::io {

/// Writes `job` to `file` atomically (creating its folder); throws troupe::error on failure.
void write_job_file(const std::filesystem::path& file, const job_description& job);
/// Reads it back; throws troupe::error naming the file when it is missing or not such JSON.
job_description read_job_file(const std::filesystem::path& file);

}  // namespace troupe::io
