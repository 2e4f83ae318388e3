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
  /// whose pseudo-gradient crosses the links as `outer_wire` (actors/worker_outer_step.cpp).
  compute::sync_config sync;
  io::wire_format outer_wire = io::wire_format::fp32;
  /// sync.overlap_steps > 0: where a fragment's pseudo-gradient waits while the next inner steps
  /// run (at least the largest fragment's size; in the worker's shared region when its rings
  /// sum through shared memory); undefined otherwise.
  at::Tensor outer_carrier;
  std::chrono::seconds collective_timeout{120};
  bool writes_checkpoints = true;  ///< this worker writes checkpoints (global rank 0)
  /// At the start of a membership generation after the first: the step every replica starts
  /// from; before the first window the replicas copy one replica's state at that step (see
  /// synchronise_replicas in worker.cpp). -1: no copy.
  int64_t synchronise_to_steps = -1;
  /// eval_every_windows: every this many steps (0: never) the worker scores its share of the
  /// held-out subset, `eval_samples` validation sequences built by `eval_batches`, between windows.
  int64_t eval_every = 0;
  uint64_t eval_samples = 0;
  int64_t eval_micro_size = 8;
  std::shared_ptr<const io::mlm_batch_builder> eval_batches;
  fault_trigger faults;  ///< the fault seam: injected faults fire at the window's moments
  worker_profile profile;
};

/// One allreduce of a worker's (actors/worker_reduce.cpp): the requests sent and answered.
struct reduce_progress {
  std::size_t buckets_sent = 0;
  int64_t awaited = 0, replied = 0;
  std::function<void()> then;  ///< set once everything is sent; runs after the last reply
  std::vector<std::function<void()>> before_then;  ///< what the sums' results need first (the word lookup's fold)
  std::chrono::steady_clock::time_point started;       ///< the first request
  std::chrono::steady_clock::time_point compute_done;  ///< the worker had nothing left but to wait
  /// How this allreduce's gradient buffer crosses the links: the config's
  /// communication_data_type for a window's gradient, fp32 for state copied between replicas.
  io::wire_format wire = io::wire_format::fp32;
};

/// Streaming DiLoCo's exchange behind the next inner steps (sync.overlap_steps τ > 0,
/// actors/worker_outer_exchange.cpp): at most one is in flight.
struct outer_exchange {
  int64_t fragment = -1;         ///< −1: none in flight
  int64_t lands_after_step = 0;  ///< the step after which its outer step falls (sent after step − τ)
  double total_weight = 0;       ///< every replica's weight in the fragment's round when it was sent
  int64_t awaited = 0, replied = 0;
  bool in_flight() const { return fragment >= 0; }
  bool arrived() const { return replied == awaited; }
};

/// The worker's state and the steps of its protocol (below), each a named member function; the
/// behaviour only dispatches to them. Callbacks capture `this`: the state lives as long as the
/// actor, and CAF runs them on the actor's own thread.
struct worker_state {
  static inline const char* name = "worker";

  // Wiring, set once when the actor starts.
  caf::stateful_actor<worker_state>* self = nullptr;
  worker_settings settings;
  caf::actor metrics, checkpointer, supervisor;

  std::shared_ptr<compute::mlm_trainer> trainer;
  caf::actor loader;
  int64_t windows_done = 0;
  uint32_t micro_in_window = 0;
  messages::window_report current;
  /// This rank's sums over the window so far; after an allreduce, every rank's.
  compute::window_totals totals;
  bool sentence_order = false;  ///< the trainer reported SOP (ALBERT)
  bool task = false;            ///< the trainer reported a fine-tuning task
  double last_lr = 0;
  compute::staging_buffer parameter_staging, optimizer_staging;
  uint64_t saves_started = 0, saves_finished = 0;
  std::chrono::steady_clock::time_point window_start, last_batch_done;
  std::chrono::steady_clock::time_point timed_start;  ///< end of the first (warm-up) window
  int64_t timed_samples = 0, timed_tokens = 0;
  training_summary summary;
  /// Summed over all ranks with the gradient (compute/window_statistics.hpp).
  std::shared_ptr<std::vector<double>> statistics = std::make_shared<std::vector<double>>();
  uint64_t reduces = 0;  ///< sequence number of the next reduce request
  std::shared_ptr<reduce_progress> reducing;  ///< the allreduce under way, or the last one
  bool overflow_in_window = false;  ///< loss scaling: a bucket of this rank's held an inf or NaN before its sum
  bool statistics_sent_early = false;  ///< DiLoCo: this window's statistics went before its last backward pass
  /// DiLoCo's counters for the reports: outer steps the parameters went through (a resume starts
  /// from ⌈step / H⌉), and the bytes this process sent for them since `run_started`.
  int64_t outer_steps_done = 0;
  int64_t outer_bytes_sent = 0;
  std::chrono::steady_clock::time_point run_started;
  /// DiLoCo, on the writer: the other ranks' inner optimizer states at the last checkpoint
  /// ("rank<r>/<name>"; buffers allocated once).
  compute::named_tensors peer_optimizer_states;
  std::shared_ptr<outer_exchange> exchange = std::make_shared<outer_exchange>();
  bool checkpoint_deferred = false;  ///< a periodic checkpoint fell while an exchange was in flight
  compute::kineto_trace trace;  ///< the `profiler` block's trace while it records

  // The protocol's steps, in the order a window runs them.
  void start(const caf::actor& data_loader);
  void on_batch(micro_batch& batch);
  void follow_profile();
  void run_micro_batch(const micro_batch& batch);
  void count_micro_batch(compute::window_totals& sums, const micro_batch& batch, const compute::micro_step_result& result);
  bool statistics_before_backward(const micro_batch& batch) const;
  bool folds_word_lookup_early() const;
  void send_statistics_early(const micro_batch& batch, compute::micro_step_result forward, double loss);
  void count_ring_sum(std::size_t ring, const reduce_result& sum, std::size_t gradient_bytes);
  void add_link_timing(std::size_t ring, const io::link_timing& link);
  void synchronise(bool window_full);
  void fill_statistics(compute::window_totals mine);
  /// What a replica copy's allreduce carries: the gradient buffer, or the statistics (on ring
  /// 0). A window's allreduce goes through the steps below instead (synchronise).
  enum class carrying { gradient, statistics };
  void reduce(carrying what, std::function<void()> then, io::wire_format wire = io::wire_format::fp32);
  /// The allreduce of the gradient buffer's elements [begin, begin + count) alone, cut among the
  /// rings (DiLoCo's fragments and the state it gathers).
  void reduce_range(int64_t begin, int64_t count, io::wire_format wire, std::function<void()> then);
  void send_slices(float* data, std::size_t count);
  // An allreduce's steps (actors/worker_reduce.cpp).
  void begin_reduce(bool overlap, io::wire_format wire);
  void send_bucket(std::size_t bucket);
  void send_remaining_buckets();
  void send_statistics();
  void send_word_lookup();
  void send_packed_lookup_rows();
  void send_request(int ring, reduce_request request, std::function<void()> on_reply = {});
  reduce_request gradient_request(float* data, std::size_t count, io::wire_format wire) const;
  void stamp(reduce_request& request);
  std::chrono::seconds reducer_backstop() const;
  std::function<void(caf::error&)> quit_on_reducer_failure(int ring, const std::string& request);
  void await_reduce(std::function<void()> then);
  void reduce_done(reduce_progress& progress);
  void synchronise_replicas(std::function<void()> then);
  void copy_state_from(int64_t donor, std::size_t buffer, std::function<void()> then);
  void end_window();
  void close_window(int64_t window_samples, const compute::window_step_result& step, bool stopping);
  void save_or_finish(bool last, bool periodic);
  // DiLoCo's steps (actors/worker_outer_step.cpp).
  bool diloco() const { return settings.sync.diloco_mode(); }
  bool fine_tuning() const { return settings.trainer.task.has_value(); }
  void weigh_window(int64_t own_weight);
  std::vector<int64_t> all_fragments() const;
  void after_inner_step(bool last, std::function<void()> then);
  void outer_step(const std::vector<int64_t>& fragments, std::function<void()> then);
  // The overlapped exchange (actors/worker_outer_exchange.cpp).
  void send_exchange(int64_t fragment);
  void send_exchange_request(int ring, reduce_request request);
  std::vector<int> exchange_rings() const;
  at::Tensor exchange_carrier(int64_t fragment) const;
  void await_exchange(std::function<void()> then);
  void land_exchange();
  bool defer_checkpoint(bool periodic);
  int64_t outer_exchange_bytes(int64_t elements) const;
  compute::fragment_range exchange_span(const std::vector<int64_t>& fragments) const;
  void gather_own_states(int64_t owner, std::size_t buffer, std::function<void()> then);
  void survivors_outer_step(const std::vector<double>& totals, std::function<void()> then);
  void sum_and_step_outer(const std::vector<int64_t>& fragments, const std::vector<double>& totals,
                          std::function<void()> then);
  void evaluate_held_out();
  void take_reduced_statistics();
  void report_window(int64_t window_samples, const compute::window_step_result& step);
  void checkpoint(bool last);
  void stage_and_send(bool last);
  void finish();
  void fail(messages::errc code, const std::string& what);
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
///     with overlap_comm, then the statistics; all awaited before the optimizer steps
///   → metrics, supervisor: (window_atom, window_report) after every window
///   → checkpointer: (save_atom, checkpoint_request) every `checkpoint_every` windows, written
///     in the background from staging buffers; the last one is awaited
///   → supervisor: (done_atom, training_summary), then the worker quits
/// Detached: compute runs on the worker's own thread. Failures end the actor with a
/// messages::errc error whose context says what failed.
caf::behavior worker(caf::stateful_actor<worker_state>* self, worker_settings settings, caf::actor metrics,
                     caf::actor checkpointer, caf::actor supervisor);

}  // namespace troupe::actors
