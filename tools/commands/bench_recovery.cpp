#include "tools/commands/bench_recovery.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "cluster/launcher.hpp"
#include "io/os/child_process.hpp"
#include "io/monitor/json_lines_follower.hpp"
#include "io/os/scratch_directory.hpp"
#include "messages/error.hpp"

namespace troupe::tools {
namespace {

std::vector<nlohmann::json> read_json_lines(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) throw make_error(file.string(), ": not found (did the job start?)");
  io::json_lines_follower lines(file);
  auto read = lines.read();
  if (!lines.problems().empty()) throw error(lines.problems().front());
  return read;
}

const nlohmann::json& first_event(const std::vector<nlohmann::json>& events, const std::string& name,
                                  const std::filesystem::path& file) {
  const auto found = std::find_if(events.begin(), events.end(), [&](const auto& e) { return e.at("event") == name; });
  if (found == events.end()) throw make_error(file.string(), ": no \"", name, "\" event");
  return *found;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

// The timeline, all on the wall clock of this host (every node of a local job shares it):
//   fault       the injecting worker records it just before it raises SIGKILL / SIGSTOP
//   node_lost   the coordinator decides (a down message, the launcher's fence, or heartbeats)
//   generation  the survivors have rejoined and the new plan went out
//   recovered   rank 0 reports the first window finished on the new world (metrics.jsonl)
// Windows lost: the step in flight at the fault, less the step the new generation starts from.
nlohmann::json measure_recovery(const std::filesystem::path& run_dir) {
  const auto events_file = run_dir / "events.jsonl";
  const auto events = read_json_lines(events_file);
  const auto windows = read_json_lines(run_dir / "metrics.jsonl");
  const auto& fault = first_event(events, "fault", events_file);
  const auto& lost = first_event(events, "node_lost", events_file);
  const auto& generation = first_event(events, "generation", events_file);
  const double fault_at = fault.at("unix_s");
  const int world_after = generation.at("world");
  std::vector<double> before, after;
  double recovered_at = -1;
  int world_before = 0;
  for (std::size_t i = 0; i < windows.size(); ++i) {
    const auto& w = windows[i];
    const double at = w.at("unix_s");
    if (at < fault_at) {
      world_before = w.at("world_size");
      if (i > 0) before.push_back(w.at("samples_per_s"));  // the first window is warm-up
    } else if (recovered_at < 0) {
      if (w.at("world_size") == world_after) recovered_at = at;  // its window includes the recovery
    } else {
      after.push_back(w.at("samples_per_s"));
    }
  }
  if (recovered_at < 0) throw make_error(run_dir.string(), ": no window finished after the fault");
  return {{"kind", fault.at("kind")},
          {"node", fault.at("node")},
          {"fault_step", fault.at("step")},
          {"world_before", world_before},
          {"world_after", world_after},
          {"detect_s", static_cast<double>(lost.at("unix_s")) - fault_at},
          {"replan_s", static_cast<double>(generation.at("unix_s")) - fault_at},
          {"recover_s", recovered_at - fault_at},
          {"windows_lost", fault.at("step").get<int64_t>() - generation.at("start_steps").get<int64_t>()},
          {"samples_per_s_before", median(before)},
          {"samples_per_s_after", median(after)},
          {"windows", windows.size()}};
}

nlohmann::json bench_recovery(const recovery_run& run) {
  io::scratch_directory scratch("troupe-bench-recovery");
  const auto run_dir = scratch / "run";
  std::vector<std::string> argv = {io::current_executable().string(), "launch", "--manifest", run.manifest.string(),
                                   "--config", run.config.string(), "--run-dir", run_dir.string(), "--inject",
                                   run.inject};
  if (run.steps > 0) {
    argv.push_back("--steps");
    argv.push_back(std::to_string(run.steps));
  }
  const auto log = scratch / "launch.log";
  const int status = std::system((cluster::shell_quote(argv) + " > " + cluster::shell_quote({log.string()}) + " 2>&1").c_str());
  if (status != 0) {
    std::ifstream in(log);
    std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (text.size() > 4000) text = "…" + text.substr(text.size() - 4000);
    throw make_error("bench recovery: the job failed (status ", status, "); its output ends:\n", text);
  }
  auto result = measure_recovery(run_dir);
  result["benchmark"] = "recovery";
  result["inject"] = run.inject;
  result["manifest"] = run.manifest.string();
  result["config"] = run.config.string();
  return result;
}

}  // namespace troupe::tools
