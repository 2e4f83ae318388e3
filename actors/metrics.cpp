#include "actors/metrics.hpp"

#include "actors/event_log.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "io/os/file_util.hpp"
#include "messages/atoms.hpp"
#include "messages/error_code.hpp"
#include "messages/progress_line.hpp"
#include "messages/training_messages.hpp"

namespace troupe::actors {
namespace {

std::string format_duration(double seconds) {
  auto s = static_cast<long long>(seconds + 0.5);
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%lldh%02lldm", s / 3600, (s / 60) % 60);
  else
    std::snprintf(text, sizeof text, "%lldm%02llds", s / 60, s % 60);
  return text;
}

nlohmann::json to_json(const messages::window_report& r) {
  const double rate = r.window_seconds > 0 ? 1.0 / r.window_seconds : 0.0;
  return {{"step", r.step},
          {"rank", r.rank},
          {"loss", r.loss},
          {"lr", r.lr},
          {"grad_norm", r.grad_norm},
          {"samples", r.samples},
          {"tokens", r.tokens},
          {"masked_tokens", r.masked_tokens},
          {"samples_per_s", static_cast<double>(r.samples) * rate},
          {"tokens_per_s", static_cast<double>(r.tokens) * rate},
          {"window_s", r.window_seconds},
          {"time_data_wait_s", r.data_wait_seconds},
          {"time_forward_s", r.forward_seconds},
          {"time_backward_s", r.backward_seconds},
          {"time_optimizer_s", r.optimizer_seconds},
          {"time_allreduce_s", r.allreduce_seconds},
          {"epoch", r.epoch},
          {"next_position", r.next_position},
          {"checkpoint_stall_s", r.checkpoint_stall_seconds},
          {"checkpoints_skipped", r.checkpoints_skipped},
          {"parameter_hash", io::hex64(r.parameter_hash)},
          {"world_size", r.world_size},
          {"straggler_rank", r.straggler_rank},
          {"straggler_lateness_s", r.straggler_lateness_seconds}};
}

// A straggler: the rank that finished its window's compute last. Being last once is noise (some
// rank always is); a rank that is late by more than a share of the window (a quarter by default),
// window after window, is slow (a busy host, a thermal-throttled core, a slow disk) and holds
// every other rank back.
void note_straggler(metrics_state& s, const metrics_settings& settings, const messages::window_report& r) {
  const bool late = r.world_size > 1 && r.straggler_lateness_seconds > settings.straggler_share * r.window_seconds;
  if (!late) {
    s.straggler_windows = 0;
    return;
  }
  s.straggler_windows = r.straggler_rank == s.straggler ? s.straggler_windows + 1 : 1;
  s.straggler = r.straggler_rank;
  if (s.straggler_windows == settings.straggler_windows)
    spdlog::warn("rank {} is a straggler: it finished its compute {:.2f} s after the first rank in a {:.2f} s window, "
                 "{} windows in a row (metrics.jsonl: straggler_rank, straggler_lateness_s)",
                 r.straggler_rank, r.straggler_lateness_seconds, r.window_seconds, s.straggler_windows);
}

}  // namespace

caf::behavior metrics(caf::stateful_actor<metrics_state>* self, metrics_settings settings) {
  auto& s = self->state;
  s.tty = settings.console && ::isatty(STDERR_FILENO) == 1;
  s.started = std::chrono::steady_clock::now();
  if (!settings.jsonl.empty()) {
    s.jsonl.open(settings.jsonl, std::ios::app);
    if (!s.jsonl) {
      self->quit(messages::make_error(messages::errc::metrics_failed, "cannot open " + settings.jsonl.string()));
      return {};
    }
  }
  return {
      [=](messages::window_atom, const messages::window_report& report) {
        auto& s = self->state;
        if (s.jsonl.is_open()) {
          auto line = to_json(report);
          line["unix_s"] = unix_seconds();  // when rank 0 reported the window
          // Flushed per window: a writer that is killed (its node lost) loses no reported window.
          s.jsonl << line.dump() << '\n' << std::flush;
        }
        note_straggler(s, settings, report);
        if (s.first_step < 0) {
          s.first_step = report.step - 1;
          s.started = std::chrono::steady_clock::now() -
                      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                          std::chrono::duration<double>(report.window_seconds));
        }
        if (!settings.console && !settings.progress_lines) return;
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started).count();
        const auto done = static_cast<double>(report.step - s.first_step);
        const double eta = done > 0 ? elapsed / done * static_cast<double>(settings.total_steps - report.step) : 0.0;
        const double samples_per_s = report.window_seconds > 0 ? report.samples / report.window_seconds : 0.0;
        char line[256];
        std::snprintf(line, sizeof line, "step %lld/%lld  loss %.4f  lr %.2e  |g| %.3f  %.1f samples/s  ETA %s",
                      static_cast<long long>(report.step), static_cast<long long>(settings.total_steps), report.loss,
                      report.lr, report.grad_norm, samples_per_s, format_duration(eta).c_str());
        if (settings.progress_lines) std::fprintf(stderr, "%s%s\n", messages::progress_line_marker, line);
        if (settings.console && s.tty) {
          std::fprintf(stderr, "\r\033[K%s", line);
          s.line_open = true;
        } else if (settings.console &&
                   (report.step % settings.steps_per_print == 0 || report.step == settings.total_steps)) {
          std::fprintf(stderr, "%s\n", line);
        }
        std::fflush(stderr);
      },
      [=](messages::flush_atom) {
        auto& s = self->state;
        if (s.jsonl.is_open()) s.jsonl.flush();
        if (s.line_open) std::fprintf(stderr, "\n");
        s.line_open = false;
        return caf::unit;
      },
  };
}

}  // namespace troupe::actors
