#include "actors/metrics.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "actors/event_log.hpp"
#include "io/os/process_memory.hpp"
#include "messages/atoms.hpp"
#include "messages/error_code.hpp"
#include "messages/metrics_batch_codec.hpp"
#include "actors/protocol/reports.hpp"

namespace troupe::actors {
namespace {

using self_pointer = caf::stateful_actor<metrics_state>*;

bool anything_waiting(const metrics_state& s) {
  return !s.resend.empty() || !s.windows.empty() || !s.checkpoints.empty() || s.final || s.written_through > 0;
}

void answer_flushes(metrics_state& s) {
  if (s.in_flight || anything_waiting(s)) return;
  for (auto& promise : s.flushes) promise.deliver(caf::unit);
  s.flushes.clear();
}

// The next batch: an earlier generation's windows alone (marked resent) while there are any,
// else everything waiting. What it takes leaves the queues.
messages::metrics_batch take_batch(metrics_state& s, const metrics_settings& settings) {
  messages::metrics_batch batch;
  batch.node = settings.node;
  batch.generation = settings.generation;
  batch.sequence = s.sequence++;
  batch.unix_seconds = unix_seconds();
  batch.resident_bytes = io::resident_bytes();
  batch.dropped = s.dropped;
  batch.links = settings.links;
  if (!s.resend.empty()) {
    batch.resent = true;
    batch.windows.assign(s.resend.begin(), s.resend.end());
    s.resend.clear();
    return batch;
  }
  batch.windows.assign(s.windows.begin(), s.windows.end());
  batch.checkpoints.assign(s.checkpoints.begin(), s.checkpoints.end());
  if (settings.warnings) batch.log = settings.warnings->take();
  batch.final = s.final;
  batch.written_through = s.written_through;
  if (settings.heartbeat_round_trips) batch.heartbeats = settings.heartbeat_round_trips();
  s.written_through = 0;
  s.windows.clear();
  s.checkpoints.clear();
  s.reported.clear();
  s.final = false;
  return batch;
}

// Sent windows are kept until the hub says it wrote their lines (the oldest let go beyond
// queue_limit).
void keep_sent(metrics_state& s, const std::vector<messages::window_report>& windows, std::size_t limit) {
  s.sent.insert(s.sent.end(), windows.begin(), windows.end());
  while (s.sent.size() > limit) s.sent.pop_front();
}

void forget_written(metrics_state& s, int64_t written) {
  s.sent.erase(std::remove_if(s.sent.begin(), s.sent.end(),
                              [written](const messages::window_report& w) { return w.step <= written; }),
               s.sent.end());
}

// Sends everything waiting as one batch, unless a batch is still in flight (then its reply
// sends the next). A batch the hub does not take in time is counted as dropped; its windows
// stay kept, for the next generation to resend should the hub be gone.
void send_batch(self_pointer self, const metrics_settings& settings) {
  auto& s = self->state;
  if (s.in_flight || !anything_waiting(s) || !settings.route) {
    answer_flushes(s);
    return;
  }
  const auto batch = take_batch(s, settings);
  keep_sent(s, batch.windows, settings.queue_limit);
  s.in_flight = true;
  const auto reports = static_cast<int64_t>(batch.windows.size());
  self->request(settings.route, settings.hub_timeout, messages::metrics_atom::value,
                messages::encode_metrics_batch(batch))
      .then(
          [self, settings](int64_t written) {
            self->state.in_flight = false;
            forget_written(self->state, written);
            send_batch(self, settings);
          },
          [self, settings, reports](caf::error& failure) {
            auto& s = self->state;
            s.in_flight = false;
            s.dropped += reports;
            spdlog::debug("node {}: the metrics hub did not take a batch: {}", settings.node,
                          self->system().render(failure));
            send_batch(self, settings);
          });
}

// Stopping: every window no hub confirmed writing (resent, sent or still queued) goes to
// settings.unwritten, oldest first.
void leave_unwritten(metrics_state& s, const metrics_settings& settings) {
  if (!settings.unwritten) return;
  auto& unwritten = *settings.unwritten;
  unwritten.assign(s.resend.begin(), s.resend.end());
  unwritten.insert(unwritten.end(), s.sent.begin(), s.sent.end());
  unwritten.insert(unwritten.end(), s.windows.begin(), s.windows.end());
  std::stable_sort(unwritten.begin(), unwritten.end(),
                   [](const messages::window_report& a, const messages::window_report& b) { return a.step < b.step; });
}

}  // namespace

caf::behavior metrics(caf::stateful_actor<metrics_state>* self, metrics_settings settings) {
  self->state.resend.assign(settings.resend.begin(), settings.resend.end());
  settings.resend.clear();  // the handlers below copy the settings
  send_batch(self, settings);
  self->delayed_send(self, settings.period, messages::tick_atom::value);
  // Stopped with flushes unanswered (its session stops every actor when a node was lost): the
  // workers awaiting them hear it now instead of at their checkpoint timeout.
  self->set_exit_handler([self, settings](caf::exit_msg& exit) {
    leave_unwritten(self->state, settings);
    for (auto& promise : self->state.flushes)
      promise.deliver(messages::make_error(messages::errc::metrics_failed, "the metrics actor stopped before the hub answered"));
    self->state.flushes.clear();
    self->quit(exit.reason);
  });
  return {
      [=](messages::window_atom, messages::window_report& report) {
        auto& s = self->state;
        if (s.windows.size() + s.checkpoints.size() >= settings.queue_limit) {
          ++s.dropped;
          if (s.windows.empty()) return;  // the queue is all checkpoint reports: this window's goes
          s.windows.pop_front();
        }
        const auto step = report.step;
        s.windows.push_back(std::move(report));
        if (++s.reported[step] >= settings.local_workers) send_batch(self, settings);
      },
      [=](messages::saved_atom, const messages::checkpoint_report& report) {
        auto& s = self->state;
        if (s.checkpoints.size() >= settings.queue_limit) s.checkpoints.pop_front();
        s.checkpoints.push_back(report);
        send_batch(self, settings);
      },
      [=](messages::tick_atom) {
        send_batch(self, settings);
        self->delayed_send(self, settings.period, messages::tick_atom::value);
      },
      [=](messages::flush_atom, bool final, int64_t written_through) {
        auto& s = self->state;
        s.final = s.final || final;
        s.written_through = std::max(s.written_through, written_through);
        auto promise = self->make_response_promise();
        s.flushes.push_back(promise);
        send_batch(self, settings);
        return promise;
      },
  };
}

}  // namespace troupe::actors
