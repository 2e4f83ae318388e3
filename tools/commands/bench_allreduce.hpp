#pragma once
/// `troupe bench allreduce`: ring allreduce bandwidth and latency, one process per rank.

#include <CLI/CLI.hpp>

namespace troupe::tools {

/// Adds `bench allreduce` (the driver: writes a local manifest, launches one rank process per
/// rank like a job, prints rank 0's JSON) and the hidden `bench allreduce-rank` it launches.
void add_bench_allreduce(CLI::App* bench);

}  // namespace troupe::tools
