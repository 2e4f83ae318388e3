#include "actors/worker.hpp"

#include <caf/all.hpp>
#include <functional>
#include <spdlog/spdlog.h>

#include "compute/error.hpp"
#include "compute/named_tensors.hpp"
#include "compute/ring_schedule.hpp"
#include "io/file_util.hpp"
#include "messages/atoms.hpp"
#include "messages/error_code.hpp"

namespace troupe::actors {
namespace {

using clock = std::chrono::steady_clock;

double seconds(clock::duration d) { return std::chrono::duration<double>(d).count(); }

/// A failed request as the worker ends with it: CAF's bare request_timeout becomes
/// errc::timed_out naming what was awaited and for how long; other errors pass through.
caf::error explained(caf::error failure, const std::string& awaited, std::chrono::seconds timeout) {
  if (failure != caf::sec::request_timeout) return failure;
  return messages::make_error(messages::errc::timed_out,
                              awaited + " did not answer within " + std::to_string(timeout.count()) + " s");
}

// Window statistics travel with ring 0's slice, so every rank reports the cluster's numbers
// and checks that the replicas agree (DESIGN §4):
//   [0] Σ loss × samples   [1] samples   [2] tokens   [3] masked tokens
//   [4+4r .. 4+4r+3]       rank r's parameter hash in four 16-bit parts, zero elsewhere;
//                          after the sum every rank holds every rank's hash exactly (doubles
//                          add integers below 2^53 exactly).
constexpr std::size_t statistics_header = 4;
constexpr int hash_parts = 4;

uint64_t parameter_hash(const compute::mlm_trainer& trainer) {
  const auto& values = trainer.parameter_values();
  return io::xxh64(values.data_ptr(), static_cast<std::size_t>(values.numel()) * values.element_size());
}

uint64_t hash_of_rank(const std::vector<double>& statistics, int64_t rank) {
  uint64_t hash = 0;
  for (int part = 0; part < hash_parts; ++part)
    hash |= static_cast<uint64_t>(statistics[statistics_header + hash_parts * rank + part]) << (16 * part);
  return hash;
}

}  // namespace

caf::behavior worker(caf::stateful_actor<worker_state>* self, worker_settings settings, caf::actor metrics,
                     caf::actor checkpointer, caf::actor supervisor) {
  try {
    self->state.trainer = settings.resumed_trainer ? std::move(settings.resumed_trainer)
                                                   : std::make_shared<compute::mlm_trainer>(settings.trainer);
  } catch (const std::exception& e) {
    self->quit(messages::make_error(messages::errc::compute_failed, e.what()));
    return {};
  }

  auto finish = [=] {
    auto& s = self->state;
    s.summary.optimizer_steps = s.trainer->optimizer_steps();
    const double timed = seconds(clock::now() - s.timed_start);
    if (s.windows_done > 1 && timed > 0) {
      s.summary.samples_per_second = static_cast<double>(s.timed_samples) / timed;
      s.summary.tokens_per_second = static_cast<double>(s.timed_tokens) / timed;
    }
    self->send(supervisor, messages::done_atom::value, s.summary);
    self->quit();
  };

  // Background checkpointing. The worker stalls only to copy its state into the staging
  // buffers; the checkpointer writes them while training goes on. At most one save is in flight
  // (so staging holds one copy): when the next is due before the previous one is written, the
  // worker waits for it (a flush request queued behind the save) or, with when_busy = "skip",
  // skips this one, logged and counted in metrics. The run's last save is awaited before `done`.
  auto on_save_failed = [=](caf::error& failure) {
    self->quit(explained(std::move(failure), "the checkpointer", settings.checkpoint_timeout));
  };
  auto stage_and_send = [=](bool last) {
    auto& s = self->state;
    const auto start = clock::now();
    messages::checkpoint_request request;
    request.keep = settings.checkpoint_keep;
    request.contents.state = settings.start;
    request.contents.state.optimizer_steps = s.trainer->optimizer_steps();
    request.contents.state.next_position = s.summary.next_position;
    request.contents.state.last_lr = s.last_lr;
    request.contents.state.rng = {
        {io::dropout_stream_name(settings.rank), s.trainer->dropout_seed(), s.trainer->dropout_calls()}};
    request.contents.model = settings.trainer.model;
    request.contents.parameters = s.parameter_staging.stage(s.trainer->named_parameters());
    request.contents.optimizer = s.optimizer_staging.stage(s.trainer->optimizer_state());
    request.contents.job = settings.job;
    s.current.checkpoint_stall_seconds += seconds(clock::now() - start);
    ++s.saves_started;
    auto on_saved = [=](const std::string& path) {
      ++self->state.saves_finished;
      self->state.summary.last_checkpoint = path;
      if (last) finish();
    };
    auto handle =
        self->request(checkpointer, settings.checkpoint_timeout, messages::save_atom::value, std::move(request));
    if (last)
      handle.await(on_saved, on_save_failed);
    else
      handle.then(on_saved, on_save_failed);
  };
  auto checkpoint = [=](bool last) {
    auto& s = self->state;
    if (s.saves_started == s.saves_finished) {
      stage_and_send(last);
    } else if (settings.skip_checkpoint_when_busy && !last) {
      ++s.current.checkpoints_skipped;
      spdlog::warn("checkpoint of step {} skipped: the previous one is still being written",
                   s.trainer->optimizer_steps());
    } else {
      const auto start = clock::now();
      self->request(checkpointer, settings.checkpoint_timeout, messages::flush_atom::value)
          .await(
              [=] {
                self->state.current.checkpoint_stall_seconds += seconds(clock::now() - start);
                stage_and_send(last);
              },
              on_save_failed);
    }
  };

  // Fills the statistics this rank contributes to the window's allreduce.
  auto fill_statistics = [=] {
    auto& s = self->state;
    auto& stats = *s.statistics;
    stats.assign(statistics_header + hash_parts * static_cast<std::size_t>(settings.world), 0.0);
    stats[0] = s.loss_weighted_sum;
    stats[1] = static_cast<double>(s.local_samples);
    stats[2] = static_cast<double>(s.current.tokens);
    stats[3] = static_cast<double>(s.current.masked_tokens);
    const uint64_t hash = parameter_hash(*s.trainer);
    for (int part = 0; part < hash_parts; ++part)
      stats[statistics_header + hash_parts * settings.rank + part] = static_cast<double>((hash >> (16 * part)) & 0xffff);
  };

  // Sends each reducer its ring's slice of the flat gradient (ring 0 also the statistics) and
  // runs `then` once every ring has replied. The worker awaits: its buffers stay untouched
  // while the reducers' threads work on them.
  auto reduce = [=](bool with_statistics, std::function<void()> then) {
    auto& s = self->state;
    const auto& gradients = s.trainer->gradients();
    float* data = gradients.data_ptr<float>();
    const auto count = static_cast<std::size_t>(gradients.numel());
    const int rings = static_cast<int>(settings.reducers.size());
    const uint64_t sequence = s.reduces++;
    auto pending = std::make_shared<int>(rings);
    const auto started = clock::now();
    for (int r = 0; r < rings; ++r) {
      messages::reduce_request request;
      const auto slice = compute::ring_slice(count, rings, r);
      request.gradient = data + slice.begin;
      request.gradient_owner = s.trainer;
      request.gradient_count = slice.size();
      if (with_statistics && r == 0) {
        request.statistics = s.statistics->data();
        request.statistic_count = s.statistics->size();
        request.statistics_owner = s.statistics;
      }
      request.sequence = sequence;
      request.window = settings.start.optimizer_steps + s.windows_done + 1;
      // The ring's own timeout (naming the peer) fires first; this one is a backstop.
      const auto backstop = settings.collective_timeout + std::chrono::seconds(30);
      self->request(settings.reducers[static_cast<std::size_t>(r)], backstop, messages::reduce_atom::value, request)
          .await(
              [=] {
                if (--*pending > 0) return;
                self->state.last_batch_done = clock::now();  // waiting for reducers is not data wait
                self->state.current.allreduce_seconds += seconds(self->state.last_batch_done - started);
                try {
                  then();
                } catch (const std::exception& e) {
                  self->quit(messages::make_error(messages::errc::compute_failed, e.what()));
                }
              },
              [=](caf::error& failure) {
                self->quit(explained(std::move(failure),
                                     "the reducer of ring " + std::to_string(r) + " (window " +
                                         std::to_string(request.window) + ")",
                                     backstop));
              });
    }
  };

  auto end_window = [=] {
    auto& s = self->state;
    auto& report = s.current;
    int64_t window_samples = static_cast<int64_t>(settings.window_samples);
    if (settings.reducers.empty()) {
      report.parameter_hash = parameter_hash(*s.trainer);
    } else {
      const auto& stats = *s.statistics;
      s.loss_weighted_sum = stats[0];
      s.local_samples = static_cast<int64_t>(stats[1]);
      window_samples = s.local_samples;
      report.tokens = static_cast<int64_t>(stats[2]);
      report.masked_tokens = static_cast<int64_t>(stats[3]);
      report.parameter_hash = hash_of_rank(stats, settings.rank);
      for (int64_t rank = 0; rank < settings.world; ++rank)
        if (hash_of_rank(stats, rank) != report.parameter_hash)
          throw make_error("replicas diverged before step ", s.trainer->optimizer_steps() + 1, ": rank ", rank,
                           "'s parameters hash to ", io::hex64(hash_of_rank(stats, rank)), ", rank ", settings.rank,
                           "'s to ", io::hex64(report.parameter_hash));
    }
    report.world_size = static_cast<int32_t>(settings.world);
    auto step = s.trainer->finish_window(window_samples);
    report.step = s.trainer->optimizer_steps();
    report.rank = static_cast<int32_t>(settings.rank);
    report.lr = step.lr;
    s.last_lr = step.lr;
    report.grad_norm = step.grad_norm;
    report.optimizer_seconds = step.optimizer_seconds;
    report.samples = window_samples;
    report.loss = s.loss_weighted_sum / static_cast<double>(s.local_samples);
    const auto now = clock::now();
    report.window_seconds = seconds(now - s.window_start);
    s.window_start = now;
    s.summary.losses.push_back(report.loss);
    ++s.windows_done;
    s.summary.windows = s.windows_done;
    if (s.windows_done == 1) {
      s.timed_start = now;
    } else {
      s.timed_samples += report.samples;
      s.timed_tokens += report.tokens;
    }
    report.next_position = s.summary.next_position;
    if (metrics) self->send(metrics, messages::window_atom::value, report);
    self->send(supervisor, messages::window_atom::value, report);  // liveness for the run's timeout
    const int64_t skipped = report.checkpoints_skipped;
    report = messages::window_report{};
    report.checkpoints_skipped = skipped;
    s.loss_weighted_sum = 0;
    s.local_samples = 0;
    s.micro_in_window = 0;
    s.last_batch_done = clock::now();  // the allreduce and the step are not data wait

    const bool last = s.windows_done == settings.windows;
    const bool periodic = settings.checkpoint_every > 0 && s.trainer->optimizer_steps() % settings.checkpoint_every == 0;
    if (settings.save_checkpoints && (last || periodic)) {
      checkpoint(last);
    } else if (last) {
      finish();
    }
  };

  return {
      [=](messages::start_atom, const caf::actor& loader) {
        auto& s = self->state;
        s.loader = loader;
        s.window_start = s.last_batch_done = clock::now();
        s.summary.next_position = settings.start.next_position;  // the data cursor: kept here only
        if (settings.windows <= 0) {
          finish();
          return;
        }
        self->send(loader, messages::credit_atom::value, settings.prefetch, caf::actor_cast<caf::actor>(self));
      },
      [=](messages::batch_atom, messages::micro_batch& batch) {
        auto& s = self->state;
        try {
          const auto received = clock::now();
          s.current.data_wait_seconds += seconds(received - s.last_batch_done);
          auto result = s.trainer->micro_step(batch.batch);
          s.current.forward_seconds += result.forward_seconds;
          s.current.backward_seconds += result.backward_seconds;
          s.current.tokens += batch.batch.tokens;
          s.current.masked_tokens += result.masked_tokens;
          s.loss_weighted_sum += result.loss * static_cast<double>(batch.batch.samples);
          s.local_samples += batch.batch.samples;
          if (settings.start.dataset_size > 0) s.current.epoch = batch.batch.first_position / settings.start.dataset_size;
          self->send(s.loader, messages::credit_atom::value, int64_t{1}, caf::actor_cast<caf::actor>(self));
          const bool window_full = ++s.micro_in_window == settings.accumulation;
          if (window_full) {
            // The cursor after this window is the window's end over all workers.
            s.summary.next_position = settings.start.next_position +
                                      static_cast<uint64_t>(s.windows_done + 1) * settings.window_samples;
          }
          if (settings.reducers.empty()) {
            if (window_full) end_window();
          } else if (settings.sync_every_micro_batch) {
            // Every micro-batch's gradient is reduced on its own and banked (DDP without
            // no_sync), the seed paper's baseline for delayed synchronisation.
            if (window_full) fill_statistics();
            reduce(window_full, [=] {
              self->state.trainer->bank_gradient();
              if (!window_full) return;
              self->state.trainer->restore_banked_gradient();
              end_window();
            });
          } else if (window_full) {
            fill_statistics();
            reduce(true, end_window);
          }
          s.last_batch_done = clock::now();
        } catch (const std::exception& e) {
          self->quit(messages::make_error(messages::errc::compute_failed, e.what()));
        }
      },
  };
}

}  // namespace troupe::actors
