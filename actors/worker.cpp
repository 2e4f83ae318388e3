#include "actors/worker.hpp"

#include <caf/all.hpp>
#include <algorithm>
#include <csignal>
#include <functional>
#include <thread>
#include <utility>
#include <spdlog/spdlog.h>

#include "actors/event_log.hpp"
#include "actors/request_failure.hpp"
#include "compute/named_tensors.hpp"
#include "compute/tensor_hash.hpp"
#include "compute/window_statistics.hpp"
#include "compute/word_lookup_gradient.hpp"
#include "io/os/file_util.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"
#include "messages/error_code.hpp"

namespace troupe::actors {
namespace {

using clock = std::chrono::steady_clock;

double seconds(clock::duration d) { return std::chrono::duration<double>(d).count(); }

/// xxh64 of the bytes of the parameters every replica agrees on (DiLoCo: the round's start) on
/// the CPU; on a GPU the device-side fingerprint (only its 8 bytes cross to the host). Every
/// rank of a world trains on the same kind of device.
uint64_t parameter_hash(const compute::mlm_trainer& trainer) {
  const auto& values = trainer.agreed_parameter_values();
  if (!values.is_cpu()) return compute::tensor_fingerprint(values);
  return io::xxh64(values.data_ptr(), static_cast<std::size_t>(values.numel()) * values.element_size());
}

}  // namespace

int64_t worker_state::step_in_flight() const { return settings.start.optimizer_steps + windows_done + 1; }

void worker_state::fail(messages::errc code, const std::string& what) {
  self->quit(messages::make_error(code, what));
}

void worker_state::start(const caf::actor& data_loader) {
  loader = data_loader;
  window_start = last_batch_done = run_started = clock::now();
  if (diloco()) outer_steps_done = settings.sync.outer_steps_through(settings.start.optimizer_steps);
  if (diloco() && settings.sync.diloco.overlap_steps > 0 && settings.reducers.size() == 1 && settings.rank == 0)
    spdlog::warn("sync.overlap_steps {} over one ring: each window's statistics queue behind the exchange on it, so it "
                 "hides behind little; rings.count 2 gives the exchange a ring of its own",
                 settings.sync.diloco.overlap_steps);
  summary.next_position = settings.start.next_position;  // the data cursor: kept here only
  auto begin = [this] {
    if (settings.windows <= 0) {
      finish();
      return;
    }
    self->send(loader, messages::credit_atom::value, settings.prefetch, caf::actor_cast<caf::actor>(self));
  };
  if (settings.synchronise_to_steps >= 0 && !settings.reducers.empty())
    synchronise_replicas(begin);
  else
    begin();
}

void worker_state::on_batch(micro_batch& batch) {
  try {
    settings.faults.before_micro_batch(step_in_flight(), windows_done + 1, micro_in_window == 0);
    if (micro_in_window == 0) follow_profile();
    const bool window_full = batch.last_in_window;
    if (window_full && micro_in_window > 0 && folds_word_lookup_early()) trainer->word_lookup().fold_rows();
    // The backward pass that completes the gradient to sum may hand it over bucket by bucket.
    if (!settings.reducers.empty() && !diloco() && (window_full || settings.sync_every_micro_batch))
      begin_reduce(settings.overlap_comm, settings.gradient_wire);
    if (batch.batch.samples > 0) run_micro_batch(batch);  // an empty one only keeps the ranks in step
    self->send(loader, messages::credit_atom::value, int64_t{1}, caf::actor_cast<caf::actor>(self));
    ++micro_in_window;
    if (window_full) {
      // The cursor after this window is the window's end over all workers.
      summary.next_position =
          settings.start.next_position + static_cast<uint64_t>(windows_done + 1) * settings.window_samples;
    }
    synchronise(window_full);
    last_batch_done = clock::now();
  } catch (const std::exception& e) {
    fail(messages::errc::compute_failed, e.what());
  }
}

/// Forward and backward of one micro-batch into the flat gradient, and its numbers.
void worker_state::run_micro_batch(const micro_batch& batch) {
  current.data_wait_seconds += seconds(clock::now() - last_batch_done);
  const bool statistics_early = statistics_before_backward(batch);
  const auto result = trainer->micro_step(
      batch.batch, [this, &batch, statistics_early](const compute::micro_step_result& forward, const at::Tensor& loss) {
        settings.faults.before_backward(step_in_flight(), micro_in_window == 0);
        if (statistics_early) send_statistics_early(batch, forward, loss.item<double>());
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

/// Over rings, before a window's last micro-batch: the lookup part of the word embeddings'
/// gradient that the earlier micro-batches left is final on this rank, so it is folded into the
/// embeddings' own gradient here (compute/word_lookup_gradient.hpp). It is then summed in their
/// bucket, which goes early in the backward pass, and only the last micro-batch's rows cross as
/// packed rows after it: fewer bytes in the exposed tail. Every rank folds at this point,
/// with or without overlap, so the sums stay the same on every rank. Not on a GPU (finding the
/// rows would wait for the device), and not where each micro-batch is summed alone.
bool worker_state::folds_word_lookup_early() const {
  return !settings.reducers.empty() && !diloco() && !settings.sync_every_micro_batch && trainer->gradients().is_cpu();
}

/// DiLoCo's inner steps over rings, without loss scaling: a window's statistics need nothing
/// its last backward pass makes (no gradient crosses, no overflow can skip a step), so that
/// micro-batch sends them between its forward and backward pass and ring 0 sums them while the
/// backward runs: over a slow link their round trips hide there instead of stopping every
/// step. (With loss scaling they wait for the gradient: every rank must skip an overflowed
/// window alike.)
bool worker_state::statistics_before_backward(const micro_batch& batch) const {
  return diloco() && !settings.reducers.empty() && batch.last_in_window && !trainer->loss_scale().has_value();
}

void worker_state::send_statistics_early(const micro_batch& batch, compute::micro_step_result forward, double loss) {
  forward.loss = loss;  // what micro_step returns as the loss after the backward pass
  auto window = totals;
  count_micro_batch(window, batch, forward);
  begin_reduce(false, io::wire_format::fp32);
  fill_statistics(window);
  send_statistics();
  statistics_sent_early = true;
}

/// What follows a micro-batch: nothing until the window is full (delayed synchronisation), then
/// one allreduce and the step; alone, just the step; with sync_every_micro_batch, an allreduce
/// after every micro-batch whose result is banked (DDP without no_sync, the seed paper's
/// baseline for delayed synchronisation).
void worker_state::synchronise(bool window_full) {
  if (settings.reducers.empty()) {
    if (window_full) end_window();
  } else if (diloco()) {  // an inner step: only the window's statistics cross the links
    if (!window_full) return;
    if (statistics_sent_early) {  // summed during the backward pass: what is left to wait for
      statistics_sent_early = false;
      await_reduce([this] { end_window(); });
      return;
    }
    fill_statistics(totals);
    reduce(carrying::statistics, [this] { end_window(); });
  } else if (settings.sync_every_micro_batch || window_full) {
    send_remaining_buckets();
    send_word_lookup();
    if (window_full) {
      fill_statistics(totals);
      send_statistics();
    }
    await_reduce([this, window_full] {
      if (settings.sync_every_micro_batch) {
        trainer->bank_gradient();
        if (!window_full) return;
        trainer->restore_banked_gradient();
      }
      end_window();
    });
  }
}

/// Fills the statistics this rank contributes to the window's allreduce from its sums `mine`
/// (compute/window_statistics.hpp).
void worker_state::fill_statistics(compute::window_totals mine) {
  if (diloco()) {  // this rank's losses are means over its own share: weighted for the window's
    overflow_in_window = trainer->gradient_overflowed();
    mine = compute::with_losses_scaled(mine, static_cast<double>(compute::loss_weight(mine, fine_tuning())));
  }
  mine.overflowed_ranks = overflow_in_window ? 1 : 0;  // its buckets were checked as they were sent
  mine.stopping_ranks = stop_requested() ? 1 : 0;
  settings.faults.before_replica_check(step_in_flight(), trainer->parameter_values().data_ptr<float>());
  *statistics = compute::window_statistics::pack(mine, {parameter_hash(*trainer), unix_seconds()}, settings.rank,
                                                 settings.world);
}

/// After an allreduce: the window's numbers over all ranks, and the check that every replica
/// started the window from the same parameters. Every rank compares every rank's hash with rank
/// 0's (the writer's), so all of them report the same diverged rank, whichever reports first.
void worker_state::take_reduced_statistics() {
  const auto summed = compute::window_statistics::unpack(*statistics, settings.world);
  totals = summed.totals;
  const auto& mine = summed.ranks[static_cast<std::size_t>(settings.rank)];
  current.parameter_hash = mine.parameter_hash;
  const auto slowest = summed.slowest();
  current.straggler_rank = slowest.rank;
  current.straggler_lateness_seconds = slowest.lateness_seconds;
  current.lateness_seconds = mine.ready_unix_seconds - slowest.first_ready_unix_seconds;
  if (const auto diverged = summed.first_diverged_rank()) {
    const uint64_t theirs = summed.ranks[static_cast<std::size_t>(*diverged)].parameter_hash;
    throw make_error("replicas diverged before step ", trainer->optimizer_steps() + 1, ": rank ", *diverged,
                     "'s parameters hash to ", io::hex64(theirs), ", rank 0's to ", io::hex64(summed.ranks[0].parameter_hash));
  }
}

/// The window's optimizer step (of the window's mean loss, clipped; DiLoCo: of the rank's own
/// share's, then the outer step when one is due), its report, and the checkpoint or the end of
/// the run when due.
void worker_state::end_window() {
  const int64_t own_weight = compute::loss_weight(totals, fine_tuning());  // before the sum replaces the totals
  if (settings.reducers.empty())
    current.parameter_hash = parameter_hash(*trainer);
  else
    take_reduced_statistics();
  if (diloco()) weigh_window(own_weight);
  // Alone, the window is the configured one; over rings, the samples all ranks processed.
  const int64_t window_samples =
      settings.reducers.empty() ? static_cast<int64_t>(settings.window_samples) : totals.samples;
  // Over rings, the summed statistics say whether any rank was asked to stop: all end here.
  const bool stopping = settings.reducers.empty() ? stop_requested() : totals.stopping_ranks > 0;
  settings.faults.before_optimizer_step(step_in_flight());
  const auto step = trainer->finish_window(totals.overflowed_ranks > 0);
  const bool last = windows_done + 1 == settings.windows || stopping;
  if (diloco()) {
    after_inner_step(last, [this, window_samples, step, stopping] { close_window(window_samples, step, stopping); });
    return;
  }
  close_window(window_samples, step, stopping);
}

/// After the window's step (and any outer step): the held-out evaluation when due, the report,
/// and the checkpoint or the end of the run.
void worker_state::close_window(int64_t window_samples, const compute::window_step_result& step, bool stopping) {
  if (settings.eval_every > 0 && trainer->optimizer_steps() % settings.eval_every == 0) evaluate_held_out();
  report_window(window_samples, step);
  last_batch_done = clock::now();  // the allreduce and the step are not data wait

  const bool last = windows_done == settings.windows || stopping;
  if (stopping && windows_done < settings.windows) {
    summary.stopped_by_signal = stop_requested() ? settings.stop->signal() : -1;
    if (settings.rank == 0)
      spdlog::warn("asked to stop: step {} is this run's last{}", trainer->optimizer_steps(),
                   settings.save_checkpoints ? ", with a checkpoint" : "");
  }
  const bool periodic = defer_checkpoint(settings.checkpoint_every > 0 &&
                                         trainer->optimizer_steps() % settings.checkpoint_every == 0);
  // DiLoCo over several ranks: the writer first collects every rank's own inner state.
  if (diloco() && !settings.reducers.empty() && settings.job_checkpoints && (last || periodic)) {
    gather_own_states(1, 0, [this, last, periodic] { save_or_finish(last, periodic); });
    return;
  }
  save_or_finish(last, periodic);
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
void worker_state::report_window(int64_t window_samples, const compute::window_step_result& step) {
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
  report.samples = window_samples;
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
  report.diloco = diloco();
  const auto now = clock::now();
  if (diloco()) {
    report.outer_steps = outer_steps_done;
    report.outer_bytes_total = outer_bytes_sent;
    const double hours = seconds(now - run_started) / 3600.0;
    report.outer_bytes_per_hour = hours > 0 ? static_cast<double>(outer_bytes_sent) / hours : 0.0;
  }
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
  overflow_in_window = false;
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
