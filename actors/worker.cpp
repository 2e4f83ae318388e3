#include "actors/worker.hpp"

#include <caf/all.hpp>
#include <algorithm>
#include <functional>
#include <utility>
#include <spdlog/spdlog.h>

#include "actors/event_log.hpp"
#include "actors/outer_rounds.hpp"
#include "actors/replica_copy.hpp"
#include "actors/request_failure.hpp"
#include "compute/named_tensors.hpp"
#include "compute/window_statistics.hpp"
#include "io/os/file_util.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"
#include "messages/error_code.hpp"

namespace troupe::actors {
namespace {

using clock = std::chrono::steady_clock;

double seconds(clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

int64_t worker_state::step_in_flight() const { return settings.start.optimizer_steps + windows_done + 1; }

void worker_state::fail(messages::errc code, const std::string& what) {
  self->quit(messages::make_error(code, what));
}

void worker_state::start(const caf::actor& data_loader) {
  loader = data_loader;
  window_start = last_batch_done = clock::now();
  summary.next_position = settings.start.next_position;  // the data cursor: kept here only
  try {
    choose_sync();
    if (settings.copy_replicas_first && !rings->alone())
      start_at(copy_replicas(trainer, *rings, *rounds, {settings.rank, settings.world, step_in_flight()}, current));
  } catch (const sum_failed& failure) {
    self->quit(failure.error());
    return;
  } catch (const std::exception& e) {
    fail(messages::errc::compute_failed, e.what());
    return;
  }
  if (settings.windows <= 0) {
    finish();
    return;
  }
  self->send(loader, messages::credit_atom::value, settings.prefetch, caf::actor_cast<caf::actor>(self));
}

/// A replica that stood behind the generation's start step (a survivor that had not finished
/// the window its neighbours had, a restarted node) goes on from there: the windows it skipped
/// are the donor's, their data too, and so are the windows left.
void worker_state::start_at(int64_t steps) {
  const int64_t skipped = steps - settings.start.optimizer_steps;
  if (skipped == 0) return;
  settings.start.optimizer_steps = steps;
  settings.start.next_position += static_cast<uint64_t>(skipped) * settings.window_samples;
  settings.windows -= skipped;
  summary.next_position = settings.start.next_position;
  self->send(loader, messages::skip_atom::value, skipped);
}

/// The one place the worker looks at its world and sync mode: which rings, window sums and
/// rounds its windows run with.
void worker_state::choose_sync() {
  rings = std::make_unique<worker_rings>(settings.reducers, settings.collective_timeout);
  const replica_wiring replica{trainer, rings.get(), settings.rank, settings.world};
  window_sums_setup window;
  window.replica = replica;
  window.faults = settings.faults;
  window.fine_tuning = fine_tuning();
  window.overlap_comm = settings.overlap_comm;
  window.gradient_wire = settings.gradient_wire;
  window.sync_every_micro_batch = settings.sync_every_micro_batch;
  const bool diloco = settings.sync.diloco_mode();
  if (rings->alone())
    sums = own_window_sums(std::move(window));
  else if (diloco)
    sums = statistics_window_sums(std::move(window));
  else
    sums = averaged_window_sums(std::move(window));
  if (!diloco) {
    rounds = std::make_unique<sync_rounds>();  // window synchronisation: nothing between windows
    return;
  }
  outer_rounds_setup outer;
  outer.replica = replica;
  outer.sync = settings.sync;
  outer.outer_wire = settings.outer_wire;
  outer.outer_carrier = settings.outer_carrier;
  outer.start_steps = settings.start.optimizer_steps;
  outer.job_checkpoints = settings.job_checkpoints;
  outer.writes_checkpoints = settings.writes_checkpoints;
  outer.run_dir = settings.run_dir;
  rounds = std::make_unique<outer_rounds>(std::move(outer));
}

/// A micro-batch: forward and backward into the flat gradient (over rings, its buckets may go
/// to the reducers during the backward pass), then, when it ends the window, the window's end.
void worker_state::on_batch(micro_batch& batch) {
  try {
    const bool first = micro_in_window == 0;
    const bool last = batch.last_in_window;
    settings.faults.before_micro_batch(step_in_flight(), windows_done + 1, first);
    if (first) follow_profile();
    sums->before_micro_batch(first, last, step_in_flight());
    if (batch.batch.samples > 0) run_micro_batch(batch);  // an empty one only keeps the ranks in step
    self->send(loader, messages::credit_atom::value, int64_t{1}, caf::actor_cast<caf::actor>(self));
    ++micro_in_window;
    if (last) {
      // The cursor after this window is the window's end over all workers.
      summary.next_position =
          settings.start.next_position + static_cast<uint64_t>(windows_done + 1) * settings.window_samples;
      end_window();
    } else {
      sums->after_micro_batch(step_in_flight(), current);
    }
    last_batch_done = clock::now();  // the sums, the step and the checkpoint are not data wait
  } catch (const sum_failed& failure) {
    self->quit(failure.error());
  } catch (const std::exception& e) {
    fail(messages::errc::compute_failed, e.what());
  }
}

/// Forward and backward of one micro-batch into the flat gradient, and its numbers.
void worker_state::run_micro_batch(const micro_batch& batch) {
  current.data_wait_seconds += seconds(clock::now() - last_batch_done);
  const bool statistics_early = sums->sends_statistics_before_backward(batch.last_in_window);
  const auto result = trainer->micro_step(
      batch.batch, [this, &batch, statistics_early](const compute::micro_step_result& forward, const at::Tensor& loss) {
        settings.faults.before_backward(step_in_flight(), micro_in_window == 0);
        if (!statistics_early) return;
        auto counted = forward;
        counted.loss = loss.item<double>();  // what micro_step returns as the loss after the backward pass
        auto window = totals;
        count_micro_batch(window, batch, counted);
        sums->send_statistics_early({window, step_in_flight(), stop_requested()});
      });
  current.forward_seconds += result.forward_seconds - result.teacher_seconds;
  current.teacher_seconds += result.teacher_seconds;
  current.backward_seconds += result.backward_seconds;
  count_micro_batch(totals, batch, result);
  if (settings.start.dataset_size > 0) current.epoch = batch.batch.first_position / settings.start.dataset_size;
}

/// Adds a micro-batch's numbers to `sums`. Its losses are its shares of the window's: they add
/// up to the window's.
void worker_state::count_micro_batch(compute::window_totals& sums, const micro_batch& batch,
                                     const compute::micro_step_result& result) {
  sums.tokens += batch.batch.tokens;
  sums.masked_tokens += result.masked_tokens;
  sums.loss_sum += result.loss;
  const double parts[] = {result.parts.ce, result.parts.mlm, result.parts.cos, result.parts.mse};
  for (std::size_t p = 0; p < sums.loss_part_sums.size(); ++p) sums.loss_part_sums[p] += parts[p];
  if (result.sentence_order) {
    sentence_order = true;
    sums.sentence_order_loss_sum += result.sentence_order_loss;
    sums.sentence_order_correct += result.sentence_order_correct;
  }
  if (result.task) {
    task = true;
    sums.task_correct += result.task_correct;
  }
  sums.samples += batch.batch.samples;
}

/// The window's end, top to bottom: every rank's sums (the replica check among them), the
/// optimizer step (unscale, clip, step: compute::mlm_trainer::finish_window), the sync mode's
/// outer steps, the held-out evaluation when due, the report, and the checkpoint or the end of
/// the run.
void worker_state::end_window() {
  const int64_t step = step_in_flight();
  const int64_t own_weight = compute::loss_weight(totals, fine_tuning());  // before the sum replaces the totals
  totals = sums->sum_window({totals, step, stop_requested()}, current);
  rounds->weigh_window(own_weight, compute::loss_weight(totals, fine_tuning()));
  const bool stopping = totals.stopping_ranks > 0;  // any rank asked: all end after this window
  const bool planned_last = windows_done + 1 == settings.windows;
  const bool last = planned_last || stopping;
  settings.faults.before_optimizer_step(step);
  const auto result = trainer->finish_window(totals.overflowed_ranks > 0);
  rounds->after_inner_step(last, step, current);
  if (settings.eval_every > 0 && trainer->optimizer_steps() % settings.eval_every == 0) evaluate_held_out();
  report_window(result);
  if (stopping && !planned_last) note_stop();
  const bool periodic =
      rounds->checkpoint_now(settings.checkpoint_every > 0 && trainer->optimizer_steps() % settings.checkpoint_every == 0);
  if (last || periodic) rounds->before_checkpoint(step_in_flight(), current);
  save_or_finish(last, periodic);
}

/// A scheduler's signal ends the run after this window, before the planned last.
void worker_state::note_stop() {
  summary.stopped_by_signal = stop_requested() ? settings.stop->signal() : -1;
  if (settings.rank == 0)
    spdlog::warn("asked to stop: step {} is this run's last{}", trainer->optimizer_steps(),
                 settings.save_checkpoints ? ", with a checkpoint" : "");
}

void worker_state::save_or_finish(bool last, bool periodic) {
  if (settings.save_checkpoints && (last || periodic) && metrics) {
    // The window's metrics line is on disk before its checkpoint starts (the hub answers once
    // it wrote it): a run resumed from this checkpoint finds every window up to it reported.
    self->request(metrics, settings.checkpoint_timeout, messages::flush_atom::value, false, trainer->optimizer_steps())
        .await([this, last] { checkpoint(last); },
               [this](caf::error& failure) {
                 self->quit(explained(std::move(failure), "the metrics actor", settings.checkpoint_timeout));
               });
  } else if (settings.save_checkpoints && (last || periodic)) {
    checkpoint(last);
  } else if (last) {
    finish();
  }
}

/// The periodic held-out evaluation: this rank scores sequences rank, rank + world, ... of the
/// first eval_samples validation sequences (the same masks every time: keyed by sample, epoch
/// 0) under the parameters the replicas agree on after this window's step (under streaming
/// DiLoCo the round start: the other fragments are in the middle of their rounds); the hub sums
/// every rank's share into the window's eval perplexity — fine-tuning: into its held-out task
/// loss and accuracy. Its time is part of the window's.
void worker_state::evaluate_held_out() {
  const auto started = clock::now();
  compute::nll_sum sum;
  compute::task_sum task;
  std::vector<compute::sample_ref> refs;
  const auto flush = [&] {
    if (refs.empty()) return;
    const auto batch = settings.eval_batches->build(refs);
    if (fine_tuning())
      task.add(trainer->evaluate_task(batch));
    else
      sum.add(trainer->evaluate(batch));
    refs.clear();
  };
  trainer->with_agreed_parameters([&] {
    for (auto i = static_cast<uint64_t>(settings.rank); i < settings.eval_samples; i += static_cast<uint64_t>(settings.world)) {
      refs.push_back({0, i});
      if (static_cast<int64_t>(refs.size()) == settings.eval_micro_size) flush();
    }
    flush();
  });
  current.eval_loss_sum = fine_tuning() ? task.loss : sum.total;
  current.eval_tokens = sum.tokens;
  current.eval_examples = task.examples;
  current.eval_correct = task.correct;
  current.eval_seconds = seconds(clock::now() - started);
}

/// Completes the window's report, sends it to metrics and the supervisor, and starts the next.
void worker_state::report_window(const compute::window_step_result& step) {
  auto& report = current;
  report.world_size = static_cast<int32_t>(settings.world);
  report.step = trainer->optimizer_steps();
  report.rank = static_cast<int32_t>(settings.rank);
  report.lr = step.lr;
  last_lr = step.lr;
  report.grad_norm = step.grad_norm;
  report.loss_scale = step.loss_scale;
  report.skipped_step = step.skipped;
  if (step.skipped && settings.rank == 0)
    spdlog::info("step {}: the fp16 gradient overflowed at loss scale {}; step skipped, scale now {} (DeepSpeed's "
                 "dynamic loss scaling)",
                 trainer->optimizer_steps(), step.loss_scale, trainer->loss_scale()->scale);
  report.optimizer_seconds = step.optimizer_seconds;
  report.samples = totals.samples;  // over rings, every rank's: the window's
  report.tokens = totals.tokens;
  report.masked_tokens = totals.masked_tokens;
  const double samples = static_cast<double>(totals.samples);
  report.loss = totals.loss_sum;
  if (settings.distilling) {
    report.distilled = true;
    report.loss_ce = totals.loss_part_sums[0];
    report.loss_mlm = totals.loss_part_sums[1];
    report.loss_cos = totals.loss_part_sums[2];
    report.loss_mse = totals.loss_part_sums[3];
  }
  if (sentence_order) {
    report.sentence_order = true;
    report.loss_mlm = totals.loss_part_sums[1];
    report.loss_sop = totals.sentence_order_loss_sum;
    report.sop_accuracy = static_cast<double>(totals.sentence_order_correct) / samples;
  }
  if (task) {
    report.task = true;
    report.task_accuracy = static_cast<double>(totals.task_correct) / samples;
  }
  rounds->fill_report(report);
  const auto now = clock::now();
  report.window_seconds = seconds(now - window_start);
  window_start = now;
  summary.losses.push_back(report.loss);
  ++windows_done;
  summary.windows = windows_done;
  if (windows_done == 1) {
    timed_start = now;  // the first window is warm-up
  } else {
    timed_samples += report.samples;
    timed_tokens += report.tokens;
  }
  report.next_position = summary.next_position;
  if (metrics) self->send(metrics, messages::window_atom::value, report);
  self->send(supervisor, messages::window_atom::value, report);  // liveness for the run's timeout
  const int64_t skipped = report.checkpoints_skipped;
  report = messages::window_report{};
  report.checkpoints_skipped = skipped;
  totals = {};
  micro_in_window = 0;
  follow_profile();
}

/// The `profiler` block: the trace starts when `wait` windows are done (at a window's first
/// micro-batch, or right after the window before) if any are left, and is written once `active`
/// more are or the session's last is; windows_done is then past `wait`, so it never restarts.
void worker_state::follow_profile() {
  const auto& profile = settings.profile;
  if (profile.trace_file.empty()) return;
  if (!trace.running() && windows_done == profile.wait && windows_done < settings.windows) {
    trace.start(settings.trainer.device.rfind("cuda", 0) == 0);
  } else if (trace.running() && (windows_done >= profile.wait + profile.active || windows_done == settings.windows)) {
    try {
      trace.stop(profile.trace_file);
      spdlog::info("profiler: windows {}-{} traced to {}", profile.wait + 1, windows_done, profile.trace_file.string());
    } catch (const std::exception& e) {
      spdlog::error("profiler: {}", e.what());  // the trace is lost; the training is not
    }
  }
}

void worker_state::finish() {
  summary.optimizer_steps = trainer->optimizer_steps();
  const double timed = seconds(clock::now() - timed_start);
  if (windows_done > 1 && timed > 0) {
    summary.samples_per_second = static_cast<double>(timed_samples) / timed;
    summary.tokens_per_second = static_cast<double>(timed_tokens) / timed;
  }
  self->send(supervisor, messages::done_atom::value, summary);
  self->quit();
}

caf::behavior worker(caf::stateful_actor<worker_state>* self, worker_settings settings, caf::actor metrics,
                     caf::actor checkpointer, caf::actor supervisor) {
  auto& s = self->state;
  s.self = self;
  s.metrics = std::move(metrics);
  s.checkpointer = std::move(checkpointer);
  s.supervisor = std::move(supervisor);
  try {
    s.trainer = settings.resumed_trainer ? std::move(settings.resumed_trainer)
                                         : std::make_shared<compute::mlm_trainer>(settings.trainer);
  } catch (const std::exception& e) {
    self->quit(messages::make_error(messages::errc::compute_failed, e.what()));
    return {};
  }
  if (settings.trainer_handoff) *settings.trainer_handoff = s.trainer;
  s.settings = std::move(settings);
  return {
      [self](messages::start_atom, const caf::actor& loader) { self->state.start(loader); },
      [self](messages::batch_atom, micro_batch& batch) { self->state.on_batch(batch); },
  };
}

}  // namespace troupe::actors
