#pragma once
/// What the training benchmarks share: the config for a world size, synthetic data, and one
/// launched job measured by its rank 0 (`troupe bench train --manifest`, `troupe bench dashboard`).

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/config/job_config.hpp"
#include "io/os/scratch_directory.hpp"

namespace troupe::tools {

/// The config for `world` workers: as written when its batch sizes fit that world; otherwise a
/// one-worker config whose micro-batch and accumulation every worker keeps (weak scaling, as
/// DDP with --world N --accum a), so the global batch grows with the world.
io::job_config config_for_world(const std::string& file, int64_t world);

/// Random tokens (`sequence_length`, the config's vocabulary) for `steps` + 1 windows in
/// SCRATCH/data, which the config then reads.
void use_synthetic_data(io::job_config& config, int64_t steps, uint32_t sequence_length,
                        const io::scratch_directory& scratch);

/// Runs the job on every node of `manifest_file` for `steps` timed windows after one warm-up
/// (no checkpoints; no metrics unless `node_arguments` say --bench-monitor) and returns rank 0's
/// summary: {"samples_per_s", "tokens_per_s", "windows"}. Throws troupe::error when a node fails.
nlohmann::json run_launched_bench(const std::string& manifest_file, const io::job_config& config, int64_t steps,
                                  const std::filesystem::path& run_dir, const std::vector<std::string>& node_arguments,
                                  const io::scratch_directory& scratch);

/// The medians over a launched run's timed windows (all but the first) of its metrics.jsonl
/// fields window_s, time_forward_s, time_backward_s, time_allreduce_s and exposed_comm_s (the
/// lowest reporting rank's), and of the backward pass of one micro-batch (time_backward_s ÷
/// gradient_accumulation_steps), and straggler_exposed_comm_s: exposed_comm_s of the rank that
/// finished its compute last (the others' wait also holds how far ahead of it they were):
/// {"window_s", ..., "backward_per_micro_s", "straggler_exposed_comm_s", "windows"}.
nlohmann::json median_window_split(const std::filesystem::path& metrics_file, int64_t micro_batches_per_window);

}  // namespace troupe::tools
