#pragma once
/// The worker actor: one model replica that runs accumulation windows.

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/stateful_actor.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "actors/fault_trigger.hpp"
#include "actors/sync_rounds.hpp"
#include "actors/window_sums.hpp"
#include "actors/worker_rings.hpp"
#include "compute/kineto_trace.hpp"
#include "compute/mlm_trainer.hpp"
#include "compute/staging_buffer.hpp"
#include "compute/sync_config.hpp"
#include "compute/window_statistics.hpp"
#include "io/checkpoint/checkpoint_store.hpp"
#include "io/comm/wire_format.hpp"
#include "io/os/stop_signals.hpp"
#include "io/data/mlm_batch_builder.hpp"
#include "messages/error_code.hpp"
#include "actors/protocol/checkpoint_request.hpp"
#include "actors/protocol/micro_batch.hpp"
#include "actors/protocol/reduce_request.hpp"
#include "actors/protocol/training_summary.hpp"
#include "actors/protocol/reports.hpp"

namespace troupe::actors {

/// The `profiler` block for one worker: after `wait` windows of this session it traces
/// `active` windows into `trace_file` (compute/kineto_trace.hpp); an empty file: no trace.
struct worker_profile {
  int64_t wait = 0;
  int64_t active = 0;
  std::filesystem::path trace_file;
};

struct worker_settings {
  compute::trainer_options trainer;
  int64_t rank = 0;
  int64_t world = 1;
  int64_t prefetch = 4;
  int64_t windows = 0;            ///< windows to run in this session
  int64_t checkpoint_every = 0;   ///< windows between checkpoints (0: only at the end)
  int64_t checkpoint_keep = 2;
  bool save_checkpoints = true;   ///< false for benchmarks
  /// The job writes checkpoints (on global rank 0): every rank knows, so that under DiLoCo all
  /// take part in collecting the ranks' inner optimizer states for them.
  bool job_checkpoints = true;
  /// Set by a scheduler's signal: the run ends after the window every rank agrees on, with a
  /// checkpoint (io/os/stop_signals.hpp); null: never asked.
  std::shared_ptr<const io::stop_request> stop;
  bool skip_checkpoint_when_busy = false;
  std::chrono::seconds checkpoint_timeout{600};
  io::training_state start;       ///< step and data cursor the run starts from
  uint64_t window_samples = 0;    ///< samples per window over all workers
  nlohmann::json job;             ///< saved with checkpoints
  /// A trainer already holding a checkpoint's state (resuming) or a previous generation's
  /// (continuing after a lost node), or null: the worker builds one.
  std::shared_ptr<compute::mlm_trainer> resumed_trainer;
  /// Where the worker leaves its trainer, so the session can carry it into the next membership
  /// generation (read only after the worker is gone); or null.
  std::shared_ptr<std::shared_ptr<compute::mlm_trainer>> trainer_handoff;
  // Data parallelism (empty `reducers`: a single-worker run).
  std::vector<caf::actor> reducers;  ///< one per ring; ring r reduces slice r of the gradient
  bool sync_every_micro_batch = false;  ///< reduce after every micro-batch instead of per window
  /// Hand each gradient bucket to the reducers as soon as the backward pass completed it
  /// (zero_optimization.overlap_comm; CPU gradients only). The sums are the same either way.
  bool overlap_comm = true;
  /// How the window's gradient crosses the links (communication_data_type); state copied
  /// between replicas always goes in fp32.
  io::wire_format gradient_wire = io::wire_format::fp32;
  bool distilling = false;  ///< the trainer distils from a teacher: reports carry the loss parts
  /// sync.mode "diloco": inner steps on this rank's own share, with only the window statistics
  /// summed, and every sync.diloco.inner_steps (and at the run's last window) an outer step
  /// whose pseudo-gradient crosses the links as `outer_wire` (actors/outer_rounds.hpp).
  compute::sync_config sync;
  io::wire_format outer_wire = io::wire_format::fp32;
  /// sync.overlap_steps > 0: where a fragment's pseudo-gradient waits while the next inner steps
  /// run (at least the largest fragment's size; in the worker's shared region when its rings
  /// sum through shared memory); undefined otherwise.
  at::Tensor outer_carrier;
  std::chrono::seconds collective_timeout{120};
  bool writes_checkpoints = true;  ///< this worker writes checkpoints (global rank 0)
  std::filesystem::path run_dir;   ///< the run directory (DiLoCo's ranks stage their checkpoint parts there)
  /// At the start of a membership generation after the first: before the first window the
  /// replicas agree on the furthest step any of them finished and copy the state of one standing
  /// there (actors/replica_copy.hpp).
  bool copy_replicas_first = false;
  /// eval_every_windows: every this many steps (0: never) the worker scores its share of the
  /// held-out subset, `eval_samples` validation sequences built by `eval_batches`, between windows.
  int64_t eval_every = 0;
  uint64_t eval_samples = 0;
  int64_t eval_micro_size = 8;
  std::shared_ptr<const io::mlm_batch_builder> eval_batches;
  fault_trigger faults;  ///< the fault seam: injected faults fire at the window's moments
  worker_profile profile;
};

/// The worker's state, split by owner: the window under way and its report are the worker's
/// own; how the window's numbers cross the ranks is `sums`'s, the sync mode's work between
/// windows is `rounds`'s, and both reach the reducers only through `rings` (handles to sums,
/// actors/protocol/sum_handle.hpp). A window reads top to bottom in on_batch and end_window.
struct worker_state {
  static inline const char* name = "worker";

  // Wiring, set once when the actor starts.
  caf::stateful_actor<worker_state>* self = nullptr;
  worker_settings settings;
  caf::actor metrics, checkpointer, supervisor;
  std::shared_ptr<compute::mlm_trainer> trainer;
  caf::actor loader;
  /// Chosen once at the start (choose_sync): a world of one, window synchronisation and DiLoCo
  /// run the same window with different objects.
  std::unique_ptr<worker_rings> rings;
  std::unique_ptr<window_sums> sums;
  std::unique_ptr<sync_rounds> rounds;

  // The window under way and the session's counts.
  int64_t windows_done = 0;
  uint32_t micro_in_window = 0;
  messages::window_report current;
  compute::window_totals totals;  ///< this rank's sums over the window so far
  bool sentence_order = false;    ///< the trainer reported SOP (ALBERT)
  bool task = false;              ///< the trainer reported a fine-tuning task
  double last_lr = 0;
  std::chrono::steady_clock::time_point window_start, last_batch_done;
  std::chrono::steady_clock::time_point timed_start;  ///< end of the first (warm-up) window
  int64_t timed_samples = 0, timed_tokens = 0;
  training_summary summary;
  compute::kineto_trace trace;  ///< the `profiler` block's trace while it records

  // Background checkpoints (actors/worker_checkpointing.cpp).
  compute::staging_buffer parameter_staging, optimizer_staging;
  uint64_t saves_started = 0, saves_finished = 0;

  // A window's steps, in the order it runs them.
  void start(const caf::actor& data_loader);
  void choose_sync();
  void start_at(int64_t steps);
  void on_batch(micro_batch& batch);
  void run_micro_batch(const micro_batch& batch);
  void count_micro_batch(compute::window_totals& sums, const micro_batch& batch, const compute::micro_step_result& result);
  void end_window();
  void evaluate_held_out();
  void report_window(const compute::window_step_result& step);
  void note_stop();
  void follow_profile();
  void save_or_finish(bool last, bool periodic);
  void checkpoint(bool last);
  void stage_and_send(bool last);
  void finish();
  void fail(messages::errc code, const std::string& what);
  bool fine_tuning() const { return settings.trainer.task.has_value(); }
  int64_t step_in_flight() const;  ///< the optimizer step the current window ends with
  bool stop_requested() const { return settings.stop && settings.stop->requested(); }
};

/// Protocol:
///   ← (start_atom, loader)            (after a membership change: copies a replica's state
///                                     over the rings first) grants the loader `prefetch` credits
///   ← (batch_atom, micro_batch)       forward + backward into the flat gradient; on the
///                                     window's last micro-batch: allreduce (when there are
///                                     reducers), average, clip, step; under DiLoCo only the
///                                     statistics are summed, the step is the rank's own, and
///                                     every inner_steps windows the pseudo-gradient is summed
///                                     and the outer optimizer steps
///   → reducers: (reduce_atom, reduce_request) for each gradient bucket of the window's last
///     micro-batch (of every micro-batch with sync_every_micro_batch), during its backward pass
///     with overlap_comm, then the statistics; the worker holds a handle per sum
///     (actors/protocol/sum_handle.hpp) and waits for all before the optimizer steps
///   → metrics, supervisor: (window_atom, window_report) after every window
///   → checkpointer: (save_atom, checkpoint_request) every `checkpoint_every` windows, written
///     in the background from staging buffers; the last one is awaited
///   → supervisor: (done_atom, training_summary), then the worker quits
/// Detached: compute runs on the worker's own thread. Failures end the actor with a
/// messages::errc error whose context says what failed.
caf::behavior worker(caf::stateful_actor<worker_state>* self, worker_settings settings, caf::actor metrics,
                     caf::actor checkpointer, caf::actor supervisor);

}  // namespace troupe::actors
