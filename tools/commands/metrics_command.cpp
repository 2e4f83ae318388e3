#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "io/data/token_dataset.hpp"
#include "io/os/scratch_directory.hpp"
#include "messages/error.hpp"
#include "tools/commands/median.hpp"
#include "tools/commands/commands.hpp"
#include "io/monitor/json_lines_follower.hpp"
#include "io/monitor/rank_detail.hpp"

namespace troupe::tools {
namespace {

struct metrics_arguments {
  std::string run_dir;
  std::string plot;
  bool json = false;
};

// What a finished (or running) run did, from its metrics.jsonl: the loss curve's ends and
// minimum, throughput (medians, so a checkpoint or warm-up window does not skew them), where
// the workers' time went (summed over every rank and window), and which rank held the others
// back most often.
nlohmann::json summarise(const std::vector<io::window_summary>& windows) {
  const auto& first = windows.front();
  const auto& last = windows.back();
  const io::window_summary* lowest = &first;
  std::vector<double> samples_per_s, tokens_per_s;
  std::map<std::string, double> time;
  double window_seconds = 0;
  int64_t rank_windows = 0;  ///< windows × ranks
  std::map<int32_t, int64_t> last_in;
  std::map<int32_t, double> lateness;
  std::map<int32_t, std::string> node_of;
  std::optional<std::pair<int64_t, double>> evaluation;
  std::optional<std::pair<int64_t, io::task_evaluation>> task_evaluation;
  for (const auto& window : windows) {
    const auto& r = window.first();
    if (r.loss < lowest->first().loss) lowest = &window;
    if (r.window_seconds > 0) {
      samples_per_s.push_back(static_cast<double>(r.samples) / r.window_seconds);
      tokens_per_s.push_back(static_cast<double>(r.tokens) / r.window_seconds);
    }
    if (r.world_size > 1) ++last_in[r.straggler_rank];
    if (window.eval_perplexity) evaluation = {window.step, *window.eval_perplexity};
    if (window.eval_task) task_evaluation = {window.step, *window.eval_task};
    // Over every rank (a large job's line lists only some: its statistics cover them all);
    // "allreduce" is the wait the compute did not hide.
    const auto statistics = io::statistics_of(window);
    const auto ranks = static_cast<double>(statistics.ranks);
    for (std::size_t p = 0; p < io::phase_count; ++p) time[io::window_phases[p]] += statistics.time[p].mean * ranks;
    window_seconds += statistics.window_s.mean * ranks;
    rank_windows += statistics.ranks;
    for (const auto& rank : window.ranks) {
      lateness[rank.report.rank] += rank.report.lateness_seconds;
      if (!rank.node.empty()) node_of[rank.report.rank] = rank.node;
    }
  }
  nlohmann::json shares = nlohmann::json::object();
  for (const auto& [phase, seconds] : time) shares[phase] = window_seconds > 0 ? seconds / window_seconds : 0.0;
  nlohmann::json summary = {
      {"windows", windows.size()},
      {"first_step", first.step},
      {"last_step", last.step},
      {"world_size", last.first().world_size},
      {"loss", {{"first", first.first().loss}, {"last", last.first().loss}, {"min", lowest->first().loss},
                {"min_step", lowest->step}}},
      {"perplexity_last", std::exp(std::min(last.first().loss, 50.0))},
      {"samples_per_s_median", median(samples_per_s)},
      {"tokens_per_s_median", median(tokens_per_s)},
      {"time_share", shares},
      {"mean_window_s", rank_windows == 0 ? 0.0 : window_seconds / static_cast<double>(rank_windows)}};
  if (evaluation) summary["eval_perplexity"] = {{"step", evaluation->first}, {"perplexity", evaluation->second}};
  if (task_evaluation)
    summary["eval_task"] = {{"step", task_evaluation->first},
                            {"loss", task_evaluation->second.loss},
                            {"accuracy", task_evaluation->second.accuracy},
                            {"examples", task_evaluation->second.examples}};
  if (!last_in.empty()) {
    const auto slowest = std::max_element(last_in.begin(), last_in.end(),
                                          [](const auto& a, const auto& b) { return a.second < b.second; });
    summary["slowest_rank"] = {{"rank", slowest->first},
                               {"node", node_of.count(slowest->first) ? node_of[slowest->first] : ""},
                               {"last_in_windows", slowest->second},
                               {"mean_lateness_s", lateness[slowest->first] / static_cast<double>(windows.size())}};
  }
  return summary;
}

/// Which sequences the run's periodic held-out evaluation scored, from RUN_DIR/job.json and the
/// data's manifest: `troupe eval --max-samples N` (the job's seed by default) measures the same.
/// Empty when either is missing (a run directory copied without its data).
nlohmann::json held_out_sequences(const std::string& run_dir) {
  std::ifstream in(std::filesystem::path(run_dir) / "job.json");
  const auto job = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!job.is_object() || !job.contains("config")) return nlohmann::json::object();
  const auto& config = job["config"];
  const auto manifest = std::filesystem::path(config.value("data", nlohmann::json::object()).value("dir", "")) / "manifest.json";
  if (!std::filesystem::exists(manifest)) return nlohmann::json::object();
  const auto* validation = io::dataset_manifest::from_file(manifest).find_split("validation");
  if (!validation) return nlohmann::json::object();
  const auto wanted = config.value("eval_samples", uint64_t{256});
  return {{"sequences", std::min<uint64_t>(wanted, validation->sequences)},
          {"validation_sequences", validation->sequences},
          {"mask_seed", config.value("seed", uint64_t{42})}};
}

void print_summary(const std::string& run_dir, const nlohmann::json& s) {
  std::printf("run            %s: %lld windows, steps %lld..%lld, %d worker(s)\n", run_dir.c_str(),
              s["windows"].get<long long>(), s["first_step"].get<long long>(), s["last_step"].get<long long>(),
              s["world_size"].get<int>());
  const auto& loss = s["loss"];
  std::printf("loss           first %.4f  last %.4f  min %.4f (step %lld)\n", loss["first"].get<double>(),
              loss["last"].get<double>(), loss["min"].get<double>(), loss["min_step"].get<long long>());
  std::printf("perplexity     last window %.1f", s["perplexity_last"].get<double>());
  if (s.contains("eval_perplexity")) {
    const auto& e = s["eval_perplexity"];
    std::printf("; held-out %.1f at step %lld", e["perplexity"].get<double>(), e["step"].get<long long>());
    if (e.contains("sequences") && e["sequences"] == e["validation_sequences"])
      std::printf(" (all %llu validation sequences, masks of seed %llu: as troupe eval measures)",
                  e["sequences"].get<unsigned long long>(), e["mask_seed"].get<unsigned long long>());
    else if (e.contains("sequences"))
      std::printf(" (the first %llu of %llu validation sequences, masks of seed %llu: troupe eval --max-samples %llu)",
                  e["sequences"].get<unsigned long long>(), e["validation_sequences"].get<unsigned long long>(),
                  e["mask_seed"].get<unsigned long long>(), e["sequences"].get<unsigned long long>());
  }
  if (s.contains("eval_task")) {
    const auto& e = s["eval_task"];
    std::printf("\nheld-out task  accuracy %.4f, loss %.4f over %lld examples at step %lld",
                e["accuracy"].get<double>(), e["loss"].get<double>(), e["examples"].get<long long>(),
                e["step"].get<long long>());
  }
  std::printf("\nthroughput     median %.1f samples/s, %.0f tokens/s\n", s["samples_per_s_median"].get<double>(),
              s["tokens_per_s_median"].get<double>());
  std::printf("time split    ");
  for (const char* phase : {"forward", "backward", "allreduce", "optimizer", "data_wait", "checkpoint", "eval", "teacher"})
    std::printf(" %s %.0f%%", phase, 100 * s["time_share"].value(phase, 0.0));
  std::printf("  (mean window %.3f s)\n", s["mean_window_s"].get<double>());
  if (s.contains("slowest_rank")) {
    const auto& slow = s["slowest_rank"];
    std::printf("slowest rank   %d%s: last to finish in %lld of %lld windows, mean lateness %.3f s\n",
                slow["rank"].get<int>(), slow["node"].get<std::string>().empty() ? "" : (" (node " + slow["node"].get<std::string>() + ")").c_str(),
                slow["last_in_windows"].get<long long>(), s["windows"].get<long long>(),
                slow["mean_lateness_s"].get<double>());
  }
}

// The loss and throughput curves through gnuplot (Debian's gnuplot-nox): PNG (cairo) or SVG by
// the file's extension, two panels sharing the step axis.
void plot(const std::vector<io::window_summary>& windows, const std::filesystem::path& out) {
  const auto extension = out.extension().string();
  if (extension != ".png" && extension != ".svg")
    throw make_error("--plot ", out.string(), ": expected a .png or .svg file name");
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
    throw error("--plot needs gnuplot (apt-get install gnuplot-nox)");
  io::scratch_directory scratch("troupe-plot");
  const bool evaluated = std::any_of(windows.begin(), windows.end(), [](const auto& w) { return w.eval_perplexity.has_value(); });
  {
    std::ofstream data(scratch / "windows.dat");
    for (const auto& w : windows) {
      const auto& r = w.first();
      data << w.step << ' ' << r.loss << ' ' << (r.window_seconds > 0 ? r.samples / r.window_seconds : 0.0) << ' '
           << (w.eval_perplexity ? std::log(*w.eval_perplexity) : std::nan("")) << '\n';
    }
    std::ofstream script(scratch / "plot.gp");
    script << (extension == ".png" ? "set terminal pngcairo size 1000,720 font ',10'\n" : "set terminal svg size 1000,720\n")
           << "set output '" << out.string() << "'\n"
           << "set datafile missing 'nan'\nset grid\nset multiplot layout 2,1\n"
           << "set ylabel 'loss'\nplot '" << (scratch / "windows.dat").string()
           << "' using 1:2 with lines lw 1.5 title 'training loss'"
           << (evaluated ? ", '' using 1:4 with points pt 7 title 'held-out loss'" : "") << "\n"
           << "set xlabel 'step'\nset ylabel 'samples/s'\nplot '' using 1:3 with lines lc rgb '#2ca02c' title 'throughput'\n"
           << "unset multiplot\n";
  }
  const auto command = "gnuplot " + (scratch / "plot.gp").string() + " 2>&1";
  if (std::system(command.c_str()) != 0) throw make_error("--plot: gnuplot could not draw ", out.string());
}

}  // namespace

void add_metrics_command(CLI::App& app) {
  auto args = std::make_shared<metrics_arguments>();
  auto* command = app.add_subcommand("metrics", "summarise a run's metrics.jsonl (and plot its curves)");
  command->add_option("run_dir", args->run_dir, "the run directory (holds metrics.jsonl)")->required();
  command->add_option("--plot", args->plot, "also draw the loss and throughput curves into FILE.png or FILE.svg");
  command->add_flag("--json", args->json, "print the summary as one JSON object");
  command->callback([args] {
    const auto windows = io::read_windows(args->run_dir);
    auto summary = summarise(windows);
    if (summary.contains("eval_perplexity")) summary["eval_perplexity"].update(held_out_sequences(args->run_dir));
    if (args->json)
      std::printf("%s\n", summary.dump().c_str());
    else
      print_summary(args->run_dir, summary);
    if (!args->plot.empty()) {
      plot(windows, args->plot);
      if (!args->json) std::printf("plot           %s\n", args->plot.c_str());
    }
  });
}

}  // namespace troupe::tools
