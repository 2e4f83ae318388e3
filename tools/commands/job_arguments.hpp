#pragma once
/// The options `troupe launch` passes through to every node and `troupe node` accepts.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "tools/commands/dashboard_arguments.hpp"

namespace troupe::tools {

struct job_arguments {
  std::string manifest;
  std::string config;
  std::string run_dir = "runs/default";
  int64_t steps = 0;
  std::string resume;
  int64_t max_windows = 0;
  std::string bench_out;  ///< node only: benchmark mode, rank 0 writes its summary here
  bool overwrite = false;  ///< launch only: start over in a run directory with checkpoints
  std::string record_samples;  ///< --record-samples DIR: every loader's samples (docs/data.md)
  dashboard_arguments dashboard;  ///< served by the head node
};

/// `manifest_required` false: `troupe launch`, whose manifest may come from a Slurm allocation.
void add_job_options(CLI::App* command, job_arguments& args, bool manifest_required = true);

/// The node command line's share of `args` (what every node of a launched job gets).
std::vector<std::string> pass_through(const job_arguments& args);

}  // namespace troupe::tools
