#pragma once
/// The metrics hub: on the head (or in a single-process run), it gathers every node's metrics
/// batches into one picture of the run and writes and serves it: metrics.jsonl, TensorBoard
/// event files, DeepSpeed's csv_monitor files, the console progress line, and the dashboard's
/// HTTP server (the page, /api, /metrics for Prometheus).

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/training_session.hpp"
#include "io/monitor/dashboard_server.hpp"
#include "io/monitor/json_lines_follower.hpp"
#include "io/monitor/metrics_store.hpp"
#include "io/monitor/shared_metrics.hpp"
#include "io/monitor/scalar_log.hpp"

namespace troupe::io {
struct job_config;
}

namespace troupe::actors {

struct metrics_hub_settings {
  io::job_description job;
  io::store_limits limits;
  std::filesystem::path jsonl;   ///< RUN_DIR/metrics.jsonl (appended); empty: none
  std::filesystem::path events;  ///< RUN_DIR/events.jsonl, followed for membership events
  std::optional<std::filesystem::path> tensorboard;  ///< event-file folder; none: off
  std::optional<std::filesystem::path> csv_monitor;  ///< csv folder; none: off
  int64_t samples_per_step = 1;  ///< DeepSpeed's monitor steps are samples: step × this
  int64_t steps_per_print = 10;  ///< console cadence when stderr is not a terminal
  bool console = true;
  /// Also one messages::progress_line_marker line per window (for `troupe launch`).
  bool progress_lines = false;
  std::optional<io::dashboard_options> dashboard;  ///< none: --no-dashboard
  std::chrono::milliseconds period{500};  ///< how often waiting windows and events.jsonl are checked
};

/// The hub's settings for a job run with `options` (its run directory, --steps, console,
/// progress lines, dashboard; files only with write_metrics) on `world_size` workers.
metrics_hub_settings hub_settings_for(const io::job_config& config, const session_options& options, int64_t world_size);

struct metrics_hub_state {
  static inline const char* name = "metrics_hub";
  std::shared_ptr<io::shared_metrics> shared;
  std::shared_ptr<io::dashboard_server> server;  ///< declared after `shared`: stopped first
  std::ofstream jsonl;
  std::vector<std::unique_ptr<io::scalar_log>> scalar_logs;
  std::unique_ptr<io::json_lines_follower> events;  ///< RUN_DIR/events.jsonl, read as it grows
  uint64_t published_version = 0;
  std::chrono::steady_clock::time_point started, last_state_published;
  int64_t first_step = -1;
  bool tty = false, line_open = false;
  bool resumed_lines_dropped = false;  ///< a resumed run's repeated steps are gone from metrics.jsonl
  int64_t lines_through_at_start = 0;  ///< metrics.jsonl's last window's step when the hub started
  /// Nodes waiting for a window's line before their checkpoint (MetricsBatch.writtenThrough).
  struct pending_sync {
    int64_t step;
    std::chrono::steady_clock::time_point deadline;  ///< then it is written with the ranks it has
    caf::response_promise reply;
  };
  std::vector<pending_sync> syncs;
};

/// Protocol:
///   ← (metrics_atom, MetricsBatch bytes) → int64_t   a node's batch, answered with the last
///                                                 step whose line is written (malformed:
///                                                 dropped, counted and logged, still answered);
///                                                 with writtenThrough S, answered once window S's
///                                                 line is written (at most half a second later:
///                                                 then with the ranks that reported); resent:
///                                                 only its windows without a line are taken
///   ← (flush_atom) → unit                         every window it holds is written
///   ← (finished_atom) → unit                      the job ended: write everything, tell the
///                                                 page (its streams end), keep serving until
///                                                 the hub stops
/// A window is written once every rank reported it, a later one overtook it, or it waited
/// `limits.window_grace_seconds` (see io::metrics_store::take_due). Spawned detached: disk
/// writes and HTTP rendering never occupy the scheduler threads the workers' messages use.
caf::behavior metrics_hub(caf::stateful_actor<metrics_hub_state>* self, metrics_hub_settings settings,
                          std::shared_ptr<io::shared_metrics> shared, std::shared_ptr<io::dashboard_server> server);

/// A started hub and where its dashboard is.
struct metrics_hub_handle {
  caf::actor actor;
  std::string url;  ///< empty without a dashboard
};

/// Starts the dashboard's server (when settings.dashboard is set; throws troupe::error naming
/// the address when it cannot listen, before any work) and spawns the hub; prints
/// "dashboard: URL" on stderr.
metrics_hub_handle start_metrics_hub(caf::actor_system& system, metrics_hub_settings settings);

/// Writes every window the hub holds, marks the job finished and waits (bounded) for it.
void finish_metrics_hub(caf::scoped_actor& self, const caf::actor& hub);

}  // namespace troupe::actors
