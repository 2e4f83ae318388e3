#include "tools/commands/bench_job.hpp"

#include <cstdlib>
#include <fstream>
#include <map>

#include "cluster/launcher.hpp"
#include "cluster/manifest.hpp"
#include "io/config/json_fields.hpp"
#include "io/data/synthetic_dataset.hpp"
#include "io/os/child_process.hpp"
#include "io/os/file_util.hpp"
#include "messages/error.hpp"
#include "tools/commands/median.hpp"

namespace troupe::tools {

io::job_config config_for_world(const std::string& file, int64_t world) {
  const auto root = io::parse_json_file(file);
  if (world == 1) return io::parse_job_config(root, file, 1);
  try {
    return io::parse_job_config(root, file, world);
  } catch (const error& for_world) {
    io::job_config one;
    try {
      one = io::parse_job_config(root, file, 1);
    } catch (const error&) {
      throw for_world;  // fits neither: the error for the manifest's world says what to change
    }
    auto job = one.source;
    job["train_batch_size"] = one.micro_batch_size * one.gradient_accumulation_steps * world;
    job["train_micro_batch_size_per_gpu"] = one.micro_batch_size;
    job["gradient_accumulation_steps"] = one.gradient_accumulation_steps;
    return io::parse_job_config(job, file, world);
  }
}

void use_synthetic_data(io::job_config& config, int64_t steps, uint32_t sequence_length,
                        const io::scratch_directory& scratch) {
  const int64_t vocab = config.model.vocab_size > 0 ? config.model.vocab_size : 30522;
  const auto sequences = static_cast<uint64_t>(config.train_batch_size * (steps + 1));
  io::write_synthetic_dataset(scratch / "data", sequences, sequence_length, vocab, config.seed);
  config.data.dir = scratch / "data";
}

nlohmann::json run_launched_bench(const std::string& manifest_file, const io::job_config& config, int64_t steps,
                                  const std::filesystem::path& run_dir, const std::vector<std::string>& node_arguments,
                                  const io::scratch_directory& scratch) {
  const auto manifest = cluster::load_manifest(manifest_file);
  auto job = config.source;
  job["data"]["dir"] = config.data.dir.string();
  job["train_batch_size"] = config.train_batch_size;
  job["train_micro_batch_size_per_gpu"] = config.micro_batch_size;
  job["gradient_accumulation_steps"] = config.gradient_accumulation_steps;
  io::write_file_atomically(scratch / "config.json", job.dump(2));
  const auto summary_file = run_dir.string() + ".summary.json";
  cluster::launch_options launch;
  launch.manifest_file = manifest_file;
  launch.config_file = scratch / "config.json";
  launch.run_dir = run_dir;
  launch.troupe_binary = io::current_executable();
  launch.node_arguments = {"--steps", std::to_string(steps + 1), "--bench-out", summary_file};
  launch.node_arguments.insert(launch.node_arguments.end(), node_arguments.begin(), node_arguments.end());
  const auto commands = cluster::node_commands(manifest, launch, std::getenv("SLURM_JOB_ID") != nullptr);
  if (cluster::run_nodes(commands, manifest.timeouts.collective + manifest.timeouts.join,
                         std::chrono::seconds(10), stderr) != 0)
    throw error("bench: a node of the launched job failed");
  return nlohmann::json::parse(io::read_whole_file(summary_file));
}

nlohmann::json median_window_split(const std::filesystem::path& metrics_file, int64_t micro_batches_per_window) {
  std::ifstream in(metrics_file);
  if (!in) throw make_error("bench: ", metrics_file.string(), " is missing (the run wrote no metrics)");
  const char* fields[] = {"window_s", "time_forward_s", "time_backward_s", "time_allreduce_s", "exposed_comm_s"};
  std::map<std::string, std::vector<double>> values;
  int64_t windows = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || windows++ == 0) continue;  // the first window is warm-up
    const auto window = nlohmann::json::parse(line);
    for (const char* field : fields) values[field].push_back(window.value(field, 0.0));
    // The rank that finished its compute last waited for nobody's compute: its wait is the
    // communication alone (the others' also holds how far they were ahead).
    for (const auto& rank : window.value("ranks", nlohmann::json::array()))
      if (rank.value("rank", -1) == window.value("straggler_rank", 0))
        values["straggler_exposed_comm_s"].push_back(rank["time"].value("allreduce", 0.0));
  }
  nlohmann::json split = {{"windows", windows > 0 ? windows - 1 : 0}};
  for (const char* field : fields) split[field] = median(values[field]);
  split["straggler_exposed_comm_s"] = median(values["straggler_exposed_comm_s"]);
  split["backward_per_micro_s"] = split["time_backward_s"].get<double>() / static_cast<double>(micro_batches_per_window);
  return split;
}

}  // namespace troupe::tools
