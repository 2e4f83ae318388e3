#include "actors/metrics.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

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
  return !s.windows.empty() || !s.checkpoints.empty() || s.final || s.written_through > 0;
}

void answer_flushes(metrics_state& s) {
  if (s.in_flight || anything_waiting(s)) return;
  for (auto& promise : s.flushes) promise.deliver(caf::unit);
  s.flushes.clear();
}

// Sends everything waiting as one batch, unless a batch is still in flight (then its reply
// sends the next). A batch the hub does not take in time is counted as dropped.
void send_batch(self_pointer self, const metrics_settings& settings) {
  auto& s = self->state;
  if (s.in_flight || !anything_waiting(s) || !settings.route) {
    answer_flushes(s);
    return;
  }
  messages::metrics_batch batch;
  batch.node = settings.node;
  batch.generation = settings.generation;
  batch.sequence = s.sequence++;
  batch.unix_seconds = unix_seconds();
  batch.resident_bytes = io::resident_bytes();
  batch.dropped = s.dropped;
  batch.windows.assign(s.windows.begin(), s.windows.end());
  batch.checkpoints.assign(s.checkpoints.begin(), s.checkpoints.end());
  if (settings.warnings) batch.log = settings.warnings->take();
  batch.final = s.final;
  batch.written_through = s.written_through;
  batch.links = settings.links;
  if (settings.heartbeat_round_trips) batch.heartbeats = settings.heartbeat_round_trips();
  s.written_through = 0;
  s.windows.clear();
  s.checkpoints.clear();
  s.reported.clear();
  s.final = false;
  s.in_flight = true;
  const auto reports = static_cast<int64_t>(batch.windows.size());
  self->request(settings.route, settings.hub_timeout, messages::metrics_atom::value,
                messages::encode_metrics_batch(batch))
      .then(
          [self, settings] {
            self->state.in_flight = false;
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

}  // namespace

caf::behavior metrics(caf::stateful_actor<metrics_state>* self, metrics_settings settings) {
  self->delayed_send(self, settings.period, messages::tick_atom::value);
  // Stopped with flushes unanswered (its session stops every actor when a node was lost): the
  // workers awaiting them hear it now instead of at their checkpoint timeout.
  self->set_exit_handler([self](caf::exit_msg& exit) {
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
