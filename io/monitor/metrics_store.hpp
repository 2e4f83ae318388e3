#pragma once
/// The head's picture of a run, built from every node's metrics batches: windows with each
/// rank's numbers, nodes, checkpoints, warnings and membership events, plus the downsampled
/// series the dashboard plots. No threads and no I/O: the metrics hub feeds it, the dashboard
/// server reads it (under the hub's lock), `troupe dashboard` rebuilds it from RUN_DIR's files.

#include <array>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/monitor/rank_detail.hpp"
#include "io/monitor/straggler_rule.hpp"
#include "io/monitor/window_summary.hpp"
#include "messages/metrics_batch.hpp"

namespace troupe::io {

class prometheus_text;

struct job_description {
  std::string name;       ///< the run directory's name
  std::string run_dir;
  int64_t total_steps = 0;
  int64_t world_size = 1;
  nlohmann::json config;  ///< the job config as given
  double started_unix_seconds = 0;
};

struct store_limits {
  std::size_t recent_windows = 300;  ///< windows kept with every rank's numbers
  std::size_t series_points = 4000;  ///< whole-run series points before old ones are merged
  double window_grace_seconds = 2.0; ///< how long a window waits for its last ranks' reports
  std::size_t kept_lines = 100;      ///< checkpoints, log lines, events kept for the page
  straggler_limits straggler;        ///< io/monitor/straggler_rule.hpp
  rank_detail detail;                ///< io/monitor/rank_detail.hpp
};

class metrics_store {
 public:
  metrics_store(job_description job, store_limits limits);

  /// Takes one node's batch (received `now`, Unix seconds). Reports of windows already
  /// written are counted as late and otherwise ignored.
  void add_batch(const messages::metrics_batch& batch, double now);
  /// Windows ready to be written, in step order: every rank of their world reported, a report
  /// two or more steps later arrived (a rank left mid-window), they waited longer than the
  /// grace, `force` (the run ended), or their step is at most `through` (a checkpoint of that
  /// step follows). Each has been through the straggler rule (marked with the straggler it
  /// names) and bounded to limits.detail (io/monitor/rank_detail.hpp); they join the recent
  /// windows and the series.
  std::vector<window_summary> take_due(double now, bool force, int64_t through = 0);
  /// The warnings for stragglers the rule named since the last call (each once, when named).
  std::vector<std::string> take_straggler_warnings();
  /// The newest step whose window was taken (written).
  int64_t last_written_step() const { return last_written_step_; }
  /// A finished window read from metrics.jsonl (troupe dashboard RUN_DIR).
  void add_written(window_summary window);
  /// A checkpoint written or skipped (also one found on disk, for troupe dashboard RUN_DIR).
  void add_checkpoint(const messages::checkpoint_report& checkpoint);
  /// A membership event (events.jsonl's objects).
  void add_event(const nlohmann::json& event);
  void add_log(const messages::log_line& line);
  void note_malformed_batch(const std::string& reason, double now);
  void mark_finished() { finished_ = true; ++version_; }
  void mark_node_lost(const std::string& node);

  bool finished() const { return finished_; }
  /// The live nodes' latest heartbeat round trips (none when no node reported any).
  std::optional<heartbeat_summary> heartbeats_now() const;
  /// Increases with every change the page would show (the server's change notification).
  uint64_t version() const { return version_; }
  int64_t last_step() const { return recent_.empty() ? 0 : recent_.back().step; }

  /// The page's state: job, progress, the latest window, nodes (a large job's: the lost ones and
  /// those last heard from longest ago, up to limits.detail.every_rank_up_to, with counts by
  /// state), workers (the latest window's listed ranks), straggler, checkpoints, events, log.
  nlohmann::json state_json(double now) const;
  /// Every node (by name), or the `most` worth a look first (lost, then last heard from longest
  /// ago, in that order).
  nlohmann::json nodes_json(double now, std::size_t most) const;
  nlohmann::json series_json() const;
  nlohmann::json windows_json(std::size_t last) const;
  std::string prometheus(double now) const;

 private:
  void prometheus_last_window(prometheus_text& out) const;
  void prometheus_nodes(prometheus_text& out, double now) const;
  struct node_status {
    std::string state = "training";  ///< training, finished, lost
    uint64_t generation = 0;
    std::set<int32_t> ranks;
    int64_t resident_bytes = 0;
    double last_seen = 0;
    int64_t dropped = 0;
    messages::heartbeat_round_trips heartbeats;  ///< from its latest batch that had any
  };
  const char* shown_state(const node_status& node) const;  ///< "finished" for all once the job is
  /// Every node (by name) while there are at most `most`; else the lost ones, then those last
  /// heard from longest ago, `most` in all, in that order.
  std::vector<std::pair<const std::string*, const node_status*>> nodes_worth_a_look(std::size_t most) const;
  struct pending_window {
    window_summary window;
    double first_seen = 0;
  };
  struct series {
    std::vector<double> step, loss, perplexity, samples_per_s, tokens_per_s;
  };
  /// Running totals for /metrics (counters and histograms since the hub started).
  struct totals {
    int64_t windows = 0;
    int64_t samples = 0;
    std::vector<double> window_seconds_buckets;  ///< cumulative counts per bound
    double window_seconds_sum = 0;
    /// (rank, phase) → seconds, while every rank is listed (limits.detail)
    std::map<std::pair<int32_t, std::string>, double> phase_seconds;
    std::array<double, phase_count> phase_seconds_all{};  ///< by phase, summed over every rank
    int64_t checkpoints_written = 0, checkpoints_skipped = 0;
    int64_t skipped_steps = 0;  ///< fp16 windows whose step an overflow skipped
    std::vector<double> checkpoint_seconds_buckets;
    double checkpoint_seconds_sum = 0;
    int64_t late_reports = 0, malformed_batches = 0;
  };

  static const std::vector<double>& window_seconds_bounds();      ///< the histograms' buckets
  static const std::vector<double>& checkpoint_seconds_bounds();
  void record(const window_summary& window);
  void count_phases(const window_summary& window);
  /// Takes the window (in step order) to the straggler rule: marks it with the named straggler,
  /// if any, and keeps the warning when the rule has just named one.
  void name_straggler(window_summary& window);
  void append_point(const window_summary& window);

  job_description job_;
  store_limits limits_;
  std::map<int64_t, pending_window> pending_;
  std::deque<window_summary> recent_;
  series series_, bucket_;  ///< bucket_: points being averaged into one (after downsampling)
  int64_t stride_ = 1;      ///< windows per series point
  std::vector<std::pair<double, double>> evaluations_;  ///< (step, perplexity)
  std::vector<std::pair<double, task_evaluation>> task_evaluations_;  ///< fine-tuning's, by step
  std::map<std::string, node_status> nodes_;
  std::map<int32_t, std::string> node_of_rank_;
  std::deque<messages::checkpoint_report> checkpoints_;
  std::deque<messages::log_line> log_;
  std::deque<nlohmann::json> events_;
  totals totals_;
  int64_t last_written_step_ = 0;
  uint64_t generation_ = 0;
  straggler_rule straggler_rule_;
  std::vector<std::string> straggler_warnings_;
  bool finished_ = false;
  uint64_t version_ = 0;
};

}  // namespace troupe::io
