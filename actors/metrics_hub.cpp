#include "actors/metrics_hub.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "actors/event_log.hpp"
#include "io/config/job_config.hpp"
#include "io/monitor/csv_monitor.hpp"
#include "io/monitor/job_file.hpp"
#include "io/monitor/monitor_scalars.hpp"
#include "io/monitor/progress_text.hpp"
#include "io/monitor/tfevents_writer.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"
#include "messages/error_code.hpp"
#include "messages/metrics_batch_codec.hpp"
#include "messages/progress_line.hpp"

namespace troupe::actors {
namespace {

using self_pointer = caf::stateful_actor<metrics_hub_state>*;

std::filesystem::path monitor_folder(const io::monitor_config& monitor, const std::filesystem::path& run_dir,
                                     const char* default_folder) {
  const auto folder = io::output_folder(monitor.output_path, run_dir, default_folder);
  return monitor.job_name.empty() ? folder : folder / monitor.job_name;
}

/// The window's scalars into the TensorBoard and csv_monitor logs (io/monitor/monitor_scalars.hpp),
/// at DeepSpeed's step: samples seen.
void write_scalars(metrics_hub_state& s, const metrics_hub_settings& settings, const io::window_summary& window) {
  if (s.scalar_logs.empty()) return;
  const int64_t samples = window.step * settings.samples_per_step;
  const auto scalars = io::monitor_scalars(window);
  for (auto& log : s.scalar_logs) {
    for (const auto& scalar : scalars) log->scalar(scalar.tag, samples, scalar.value, window.unix_seconds);
    log->flush();
  }
}

// The console: one line per window on a terminal (redrawn in place), every steps_per_print
// windows otherwise; with progress_lines also a marked record per window for the launcher.
void print_progress(metrics_hub_state& s, const metrics_hub_settings& settings, const io::window_summary& window) {
  if (!settings.console && !settings.progress_lines) return;
  const auto& r = window.first();
  if (s.first_step < 0) {
    s.first_step = window.step - 1;
    s.started = std::chrono::steady_clock::now() - std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                       std::chrono::duration<double>(r.window_seconds));
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started).count();
  const auto done = static_cast<double>(window.step - s.first_step);
  const auto total = settings.job.total_steps;
  const double eta = done > 0 ? elapsed / done * static_cast<double>(total - window.step) : 0.0;
  const std::string text = io::progress_text(window, total, eta);
  const char* line = text.c_str();
  if (settings.progress_lines) std::fprintf(stderr, "%s%s\n", messages::progress_line_marker, line);
  if (settings.console && s.tty) {
    std::fprintf(stderr, "\r\033[K%s", line);
    s.line_open = true;
  } else if (settings.console && (window.step % settings.steps_per_print == 0 || window.step == total)) {
    std::fprintf(stderr, "%s\n", line);
  }
  std::fflush(stderr);
}

/// Writes and publishes the windows the store says are due (`force`: all of them; `through`:
/// every one up to that step).
void write_due(self_pointer self, const metrics_hub_settings& settings, bool force, int64_t through = 0) {
  auto& s = self->state;
  std::vector<io::window_summary> due;
  std::vector<std::string> warnings;
  {
    std::lock_guard lock(s.shared->mutex);
    due = s.shared->store.take_due(unix_seconds(), force, through);
    warnings = s.shared->store.take_straggler_warnings();
  }
  for (const auto& warning : warnings) {
    if (s.line_open) std::fprintf(stderr, "\n");
    s.line_open = false;
    spdlog::warn("{}", warning);
  }
  if (!due.empty() && !s.resumed_lines_dropped && s.jsonl.is_open()) {
    // A resumed run (or one restarted from a checkpoint) reports its windows from the
    // checkpoint on again: the lines an earlier run wrote for them go first.
    s.resumed_lines_dropped = true;
    s.jsonl.close();
    const auto dropped = io::drop_windows_from(settings.jsonl, due.front().step);
    if (dropped.windows > 0)
      spdlog::info("metrics.jsonl: replaced {} line(s) of step {} and later (the run goes on from step {})",
                   dropped.windows, due.front().step, due.front().step - 1);
    if (dropped.torn) spdlog::info("metrics.jsonl: dropped its last line, cut short by a writer that ended mid-line");
    s.jsonl.open(settings.jsonl, std::ios::app);
  }
  for (const auto& window : due) {
    const auto line = io::window_json(window);
    if (s.jsonl.is_open()) s.jsonl << line.dump() << '\n';
    write_scalars(s, settings, window);
    print_progress(s, settings, window);
    if (s.server) s.server->publish("window", line.dump());
  }
  if (!due.empty() && s.jsonl.is_open()) s.jsonl.flush();
}

int64_t last_written_step(metrics_hub_state& s) {
  std::lock_guard lock(s.shared->mutex);
  return s.shared->store.last_written_step();
}

// A resent batch (actors/metrics.hpp) brings windows an earlier generation reported to a hub
// that may have died before writing them: those with a line already (in metrics.jsonl when this
// hub started, or written by it) are let go; a resent window never replaces a line.
void keep_unwritten(metrics_hub_state& s, messages::metrics_batch& batch) {
  const int64_t written = std::max(s.lines_through_at_start, s.shared->store.last_written_step());
  auto& windows = batch.windows;
  windows.erase(std::remove_if(windows.begin(), windows.end(),
                               [written](const messages::window_report& w) { return w.step <= written; }),
                windows.end());
  if (!windows.empty())
    spdlog::info("metrics hub: node {} resent {} report(s) of step(s) {}–{} that no hub had written", batch.node,
                 windows.size(), windows.front().step, windows.back().step);
}

// A node about to write a checkpoint of step S waits until S's line is written: at once when
// every rank reported it, else when the rest arrive, or after half a second with the ranks it has
// (a node that died mid-window would otherwise hold the checkpoint back).
void answer_syncs(self_pointer self, const metrics_hub_settings& settings) {
  auto& s = self->state;
  const auto now = std::chrono::steady_clock::now();
  for (const auto& sync : s.syncs)
    if (now >= sync.deadline) write_due(self, settings, false, sync.step);
  const int64_t written = last_written_step(s);
  auto waiting = s.syncs.begin();
  for (auto& sync : s.syncs) {
    if (written >= sync.step)
      sync.reply.deliver(written);
    else
      *waiting++ = std::move(sync);
  }
  s.syncs.erase(waiting, s.syncs.end());
}

// events.jsonl is appended by every process that sees a membership change; the hub takes the
// complete lines added since its last look.
// (a torn line is skipped: events.jsonl is for people, not worth stopping a hub for)
void follow_events(metrics_hub_state& s) {
  if (!s.events) return;
  auto events = s.events->read();
  std::lock_guard lock(s.shared->mutex);
  for (const auto& event : events) s.shared->store.add_event(event);
}

void publish_state(metrics_hub_state& s, bool force) {
  if (!s.server) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - s.last_state_published < std::chrono::seconds(1)) return;
  std::string state;
  {
    std::lock_guard lock(s.shared->mutex);
    if (!force && s.shared->store.version() == s.published_version) return;
    s.published_version = s.shared->store.version();
    state = s.shared->store.state_json(unix_seconds()).dump();
  }
  s.last_state_published = now;
  s.server->publish("state", state);
}

}  // namespace

metrics_hub_settings hub_settings_for(const io::job_config& config, const session_options& options, int64_t world_size) {
  metrics_hub_settings settings;
  const auto& run_dir = options.run_dir;
  settings.job.name = std::filesystem::absolute(run_dir).lexically_normal().filename().string();
  settings.job.run_dir = std::filesystem::absolute(run_dir).lexically_normal().string();
  settings.job.total_steps = options.steps.value_or(config.train_steps);
  settings.job.world_size = world_size;
  settings.job.config = config.source;
  settings.job.started_unix_seconds = unix_seconds();
  settings.samples_per_step = config.train_batch_size;
  settings.steps_per_print = config.steps_per_print;
  settings.console = options.console;
  settings.progress_lines = options.progress_lines;
  settings.dashboard = options.dashboard;
  if (options.write_metrics) {
    settings.jsonl = run_dir / "metrics.jsonl";
    settings.events = run_dir / "events.jsonl";
    if (config.tensorboard.enabled) settings.tensorboard = monitor_folder(config.tensorboard, run_dir, "tensorboard");
    if (config.csv_monitor.enabled) settings.csv_monitor = monitor_folder(config.csv_monitor, run_dir, "csv_monitor");
  }
  return settings;
}

caf::behavior metrics_hub(caf::stateful_actor<metrics_hub_state>* self, metrics_hub_settings settings,
                          std::shared_ptr<io::shared_metrics> shared, std::shared_ptr<io::dashboard_server> server) {
  auto& s = self->state;
  s.shared = std::move(shared);
  s.server = std::move(server);
  s.tty = settings.console && ::isatty(STDERR_FILENO) == 1;
  s.started = std::chrono::steady_clock::now();
  if (!settings.events.empty()) s.events = std::make_unique<io::json_lines_follower>(settings.events);
  try {
    if (!settings.jsonl.empty()) {
      std::filesystem::create_directories(settings.jsonl.parent_path());  // on a head that is not rank 0's node
      s.lines_through_at_start = io::last_window_step(settings.jsonl);  // a new head's: its predecessor's lines
      s.jsonl.open(settings.jsonl, std::ios::app);
      if (!s.jsonl) throw std::runtime_error("cannot open " + settings.jsonl.string());
    }
    if (settings.tensorboard)
      s.scalar_logs.push_back(std::make_unique<io::tfevents_writer>(*settings.tensorboard, unix_seconds()));
    if (settings.csv_monitor) s.scalar_logs.push_back(std::make_unique<io::csv_monitor>(*settings.csv_monitor));
  } catch (const std::exception& e) {
    self->quit(messages::make_error(messages::errc::metrics_failed, e.what()));
    return {};
  }
  self->delayed_send(self, settings.period, messages::tick_atom::value);
  return {
      [=](messages::metrics_atom, const std::string& bytes) {
        auto& s = self->state;
        auto reply = self->make_response_promise();
        int64_t through = 0;
        try {
          auto batch = messages::decode_metrics_batch(bytes);
          through = batch.written_through;
          std::lock_guard lock(s.shared->mutex);
          if (batch.resent) keep_unwritten(s, batch);
          s.shared->store.add_batch(batch, unix_seconds());
        } catch (const std::exception& e) {
          spdlog::warn("metrics hub: dropped a malformed batch ({} bytes): {}", bytes.size(), e.what());
          std::lock_guard lock(s.shared->mutex);
          s.shared->store.note_malformed_batch(e.what(), unix_seconds());
        }
        write_due(self, settings, false);
        if (through > 0)
          s.syncs.push_back({through, std::chrono::steady_clock::now() + std::chrono::milliseconds(500), reply});
        else
          reply.deliver(last_written_step(s));
        answer_syncs(self, settings);
        return reply;
      },
      [=](messages::tick_atom) {
        auto& s = self->state;
        follow_events(s);
        write_due(self, settings, false);
        answer_syncs(self, settings);
        publish_state(s, false);
        self->delayed_send(self, settings.period, messages::tick_atom::value);
      },
      [=](messages::flush_atom) {
        write_due(self, settings, true);
        answer_syncs(self, settings);
        return caf::unit;
      },
      [=](messages::finished_atom) {
        auto& s = self->state;
        follow_events(s);
        write_due(self, settings, true);
        {
          std::lock_guard lock(s.shared->mutex);
          s.shared->store.mark_finished();
        }
        if (s.line_open) std::fprintf(stderr, "\n");
        s.line_open = false;
        publish_state(s, true);
        if (s.server) s.server->end_streams();
        return caf::unit;
      },
  };
}

metrics_hub_handle start_metrics_hub(caf::actor_system& system, metrics_hub_settings settings) {
  auto shared = std::make_shared<io::shared_metrics>(io::metrics_store(settings.job, settings.limits));
  std::shared_ptr<io::dashboard_server> server;
  metrics_hub_handle handle;
  if (!settings.jsonl.empty()) {
    try {
      io::write_job_file(settings.jsonl.parent_path() / "job.json", settings.job);
    } catch (const std::exception& e) {  // for `troupe dashboard` later; not worth stopping training for
      spdlog::warn("metrics hub: {} (troupe dashboard will not know the job's config)", e.what());
    }
  }
  if (settings.dashboard) {
    try {
      server = std::make_shared<io::dashboard_server>(*settings.dashboard, io::dashboard_routes_for(shared));
    } catch (const std::exception& e) {
      throw make_error(e.what(), "; choose another with --dashboard-port / --dashboard-bind, or --no-dashboard");
    }
    handle.url = server->url();
    std::fprintf(stderr, "dashboard: %s\n", handle.url.c_str());
    std::fflush(stderr);
  }
  handle.actor = system.spawn<caf::detached>(metrics_hub, std::move(settings), std::move(shared), std::move(server));
  return handle;
}

void finish_metrics_hub(caf::scoped_actor& self, const caf::actor& hub) {
  if (!hub) return;
  self->request(hub, std::chrono::seconds(30), messages::finished_atom::value)
      .receive([] {}, [](caf::error&) {});
}

}  // namespace troupe::actors
