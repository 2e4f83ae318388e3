#include "actors/worker.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/request_failure.hpp"
#include "actors/event_log.hpp"
#include "messages/atoms.hpp"

namespace troupe::actors {
namespace {

using clock = std::chrono::steady_clock;

double seconds(clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

// Background checkpointing. The worker stalls only to copy its state into the staging buffers;
// the checkpointer writes them while training goes on. At most one save is in flight (so
// staging holds one copy): when the next is due before the previous one is written, the worker
// waits for it (a flush request queued behind the save) or, with when_busy = "skip", skips this
// one, logged and counted in metrics. The run's last save is awaited before `done`.
void worker_state::checkpoint(bool last) {
  if (saves_started == saves_finished) {
    stage_and_send(last);
  } else if (settings.skip_checkpoint_when_busy && !last) {
    ++current.checkpoints_skipped;
    spdlog::warn("checkpoint of step {} skipped: the previous one is still being written", trainer->optimizer_steps());
    if (metrics) {
      messages::checkpoint_report skipped;
      skipped.step = trainer->optimizer_steps();
      skipped.unix_seconds = unix_seconds();
      skipped.skipped = true;
      self->send(metrics, messages::saved_atom::value, skipped);
    }
  } else {
    const auto waiting_since = clock::now();
    self->request(checkpointer, settings.checkpoint_timeout, messages::flush_atom::value)
        .await(
            [this, waiting_since, last] {
              current.checkpoint_stall_seconds += seconds(clock::now() - waiting_since);
              stage_and_send(last);
            },
            [this](caf::error& failure) {
              self->quit(explained(std::move(failure), "the checkpointer", settings.checkpoint_timeout));
            });
  }
}

void worker_state::stage_and_send(bool last) {
  const auto staging_since = clock::now();
  checkpoint_request request;
  request.keep = settings.checkpoint_keep;
  request.contents.state = settings.start;
  request.contents.state.optimizer_steps = trainer->optimizer_steps();
  request.contents.state.next_position = summary.next_position;
  request.contents.state.last_lr = last_lr;
  request.contents.state.loss_scale = trainer->loss_scale();
  // Dropout is keyed by sample: its seed is all a resume needs (no per-rank stream position).
  request.contents.state.rng = {{io::dropout_keys_name, trainer->dropout_seed(), 0}};
  request.contents.model = settings.trainer.model;
  request.contents.task = settings.trainer.task;
  request.contents.parameters = parameter_staging.stage(trainer->named_agreed_parameters());
  request.contents.optimizer = optimizer_staging.stage(trainer->optimizer_state());
  request.contents.parts = rounds->rank_parts();  // DiLoCo: the other ranks' own, on disk already
  request.contents.job = settings.job;
  current.checkpoint_stall_seconds += seconds(clock::now() - staging_since);
  ++saves_started;
  auto on_saved = [this, last](const std::string& path) {
    ++saves_finished;
    summary.last_checkpoint = path;
    if (last) finish();
  };
  auto on_failed = [this](caf::error& failure) {
    self->quit(explained(std::move(failure), "the checkpointer", settings.checkpoint_timeout));
  };
  auto handle = self->request(checkpointer, settings.checkpoint_timeout, messages::save_atom::value, std::move(request));
  if (last)
    handle.await(on_saved, on_failed);
  else
    handle.then(on_saved, on_failed);
}

}  // namespace troupe::actors
