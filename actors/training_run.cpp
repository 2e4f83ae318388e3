#include "actors/training_run.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <utility>

#include "actors/checkpointer.hpp"
#include "actors/metrics.hpp"
#include "actors/metrics_hub.hpp"
#include "actors/reducer.hpp"
#include "io/comm/ring_collective.hpp"
#include "io/comm/wire_format.hpp"
#ifdef TROUPE_HAS_NCCL
#include "io/comm/nccl/nccl_collective.hpp"
#endif
#include "actors/warning_log.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"

namespace troupe::actors {

training_run::training_run(caf::actor_system& system, caf::scoped_actor& supervisor, io::job_config config,
                           const session_options& options, const cluster_role& role, carried_state* carried)
    : carried_(carried),
      continuing_(carried != nullptr && !carried->trainers.empty()),
      system_(system),
      supervisor_(supervisor),
      config_(std::move(config)),
      options_(options),
      role_(role),
      world_(role.world),
      first_rank_(role.first_rank),
      local_workers_(static_cast<int>(role.transports.size())),
      writes_checkpoints_(first_rank_ == 0) {}

generation_outcome training_run::execute() {
  check_inputs();
  prepare_trainers();
  check_staging_fits();
  // A resume is checked (and loaded) before the run directory is taken, so a refused resume
  // leaves nothing behind; a fresh start takes it first, to check it holds no older run. A
  // new membership generation goes on from the trainers it carries, in the same directory.
  if (!continuing_) {
    // A later generation's replicas copy their state from a live one: nothing to read.
    if (!options_.resume.empty() && !later_generation())
      resumed_ = resume_trainers(config_, options_, *dataset_, trainers_, world_);
    hold_run_directory();
  }
  set_start_state();
  spawn_reporters();
  for (int local = 0; local < local_workers_; ++local) spawn_rank(local);
  for (const auto& actor : {metrics_actor_, checkpoint_actor_, hub_})
    if (actor) spawned_.push_back(actor);
  for (const auto& actor : spawned_) supervisor_->monitor(actor);
  if (role_.coordinator) supervisor_->monitor(role_.coordinator);
  generation_outcome outcome;
  outcome.summary = await_summaries();
  if (handing_over()) {
    hand_over();
    outcome.summary.reset();
    outcome.next_generation = membership_->state().next_generation;
    outcome.head_lost = membership_->state().head_lost;
    outcome.reconnect = membership_->state().reconnect;
    outcome.reason = membership_->state().replan_reason;
    if (announced_plan_.first == outcome.next_generation) outcome.next_plan = announced_plan_.second;
    return outcome;
  }
  stop();
  if (!failure_.empty()) throw error(failure_);
  return outcome;
}

/// The node's metrics actor (its batches go to the head's hub through the coordinator, or to
/// this run's own hub), and global rank 0's checkpointer.
void training_run::spawn_reporters() {
  if (!options_.metrics_wanted()) {
    if (writes_checkpoints_) checkpoint_actor_ = system_.spawn<caf::detached>(checkpointer, options_.run_dir, faults_, caf::actor{});
    return;
  }
  if (own_hub()) hub_ = start_metrics_hub(system_, hub_settings_for(config_, options_, world_)).actor;
  metrics_settings metric_options;
  metric_options.route = own_hub() ? hub_ : role_.coordinator;
  metric_options.local_workers = local_workers_;
  metric_options.warnings = warning_log::attach();
  metric_options.node = role_.node;
  metric_options.generation = role_.generation;
  metric_options.links = role_.links;
  metric_options.heartbeat_round_trips = role_.heartbeat_round_trips;
  if (carried_) {  // a cluster job: windows outlive the generation (and the head) that saw them
    metric_options.resend = std::exchange(carried_->unwritten_windows, {});
    unwritten_windows_ = std::make_shared<std::vector<messages::window_report>>();
    metric_options.unwritten = unwritten_windows_;
  }
  metrics_actor_ = system_.spawn(metrics, metric_options);
  if (writes_checkpoints_) checkpoint_actor_ = system_.spawn<caf::detached>(checkpointer, options_.run_dir, faults_, metrics_actor_);
}

/// One local worker: its reducers (one per ring), the worker, its data loader.
void training_run::spawn_rank(int local) {
  const int rank = first_rank_ + local;
  worker_settings w;
  w.trainer = trainers_[static_cast<std::size_t>(local)];
  w.rank = rank;
  w.world = world_;
  w.prefetch = config_.data.prefetch;
  w.windows = windows_;
  w.checkpoint_every = config_.checkpoint.every_windows;
  w.checkpoint_keep = config_.checkpoint.keep;
  w.writes_checkpoints = writes_checkpoints_ && local == 0;
  w.save_checkpoints = options_.save_checkpoints && w.writes_checkpoints;
  w.job_checkpoints = options_.save_checkpoints;
  w.run_dir = options_.run_dir;
  w.skip_checkpoint_when_busy = config_.checkpoint.skip_when_busy;
  w.checkpoint_timeout = options_.checkpoint_timeout;
  w.stop = options_.stop;
  w.start = start_;
  w.window_samples = static_cast<uint64_t>(config_.train_batch_size);
  w.job = config_.source;
  if (continuing_)
    w.resumed_trainer = carried_->trainers[static_cast<std::size_t>(local)];
  else if (resumed_.contents)
    w.resumed_trainer = std::move(resumed_.trainers[static_cast<std::size_t>(local)]);
  w.trainer_handoff = std::make_shared<std::shared_ptr<compute::mlm_trainer>>();
  handoffs_.push_back(w.trainer_handoff);
  w.sync_every_micro_batch = config_.sync_every_micro_batch;
  w.overlap_comm = config_.overlap_comm;
  w.gradient_wire = *io::parse_wire_format(config_.communication_data_type);  // the config allows no other
  w.distilling = config_.distillation.enabled;
  w.sync = config_.sync;
  if (config_.sync.diloco_mode()) w.outer_wire = *io::parse_wire_format(config_.sync.diloco.communication_data_type);
  w.outer_carrier = outer_carrier(local, w.trainer.device);
  if (eval_batches_) {
    w.eval_every = config_.eval_every_windows;
    w.eval_samples = std::min<uint64_t>(static_cast<uint64_t>(config_.eval_samples), validation_->size());
    w.eval_micro_size = config_.micro_batch_size;
    w.eval_batches = eval_batches_;
  }
  w.faults = faults_;
  if (config_.profiler.enabled) {
    const auto folder = io::output_folder(config_.profiler.output_path, options_.run_dir, "profile");
    w.profile = {config_.profiler.wait, config_.profiler.active,
                 folder / ("rank" + std::to_string(rank) + ".pt.trace.json")};
  }
  w.copy_replicas_first = later_generation();
  w.collective_timeout = role_.collective_timeout;
  w.reducers = spawn_reducers(local, rank);  // none in a world of one
  auto worker_actor = system_.spawn<caf::detached>(worker, w, metrics_actor_,
                                                   w.save_checkpoints ? checkpoint_actor_ : caf::actor{},
                                                   caf::actor_cast<caf::actor>(supervisor_));
  auto loader_actor = system_.spawn<caf::detached>(data_loader, loader_settings(rank));
  spawned_.push_back(worker_actor);
  spawned_.push_back(loader_actor);
  supervisor_->send(worker_actor, messages::start_atom::value, loader_actor);
}

/// One reducer per ring for local worker `local`, each over its ring's collective.
std::vector<caf::actor> training_run::spawn_reducers(int local, int rank) {
  std::vector<caf::actor> reducers;
  const std::size_t rings = nccl() ? role_.nccl_ids.size() : role_.ring_orders.size();
  for (std::size_t ring = 0; ring < rings; ++ring) {
    reducer_settings r;
    r.open = collective_opener(local, rank, static_cast<int>(ring));
    r.ring_index = static_cast<int>(ring);
    r.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(role_.collective_timeout);
    r.faults = faults_;
    r.session = caf::actor_cast<caf::actor>(supervisor_);
    reducers.push_back(system_.spawn<caf::detached>(reducer, r));
    spawned_.push_back(reducers.back());
    reducers_.insert(reducers.back().address());
  }
  return reducers;
}

/// How ring `ring` of local worker `local` opens its collective: over the plan's transport
/// (UCX, or shared memory when the worker's gradient lives in a shared region), or, under
/// transport "nccl", as a NCCL communicator on the worker's GPU.
std::function<std::unique_ptr<io::collective>()> training_run::collective_opener(int local, int rank, int ring) const {
  const auto index = static_cast<std::size_t>(local);
  if (nccl()) {
#ifdef TROUPE_HAS_NCCL
    return [id = role_.nccl_ids[static_cast<std::size_t>(ring)], world = world_, rank,
            device = role_.cuda_devices[index], ring,
            timeout = std::chrono::duration_cast<std::chrono::milliseconds>(role_.collective_timeout)] {
      return std::make_unique<io::nccl_collective>(id, world, rank, device, ring, timeout);
    };
#else
    throw error("transport \"nccl\": this troupe was built without NCCL");
#endif
  }
  return [transport = role_.transports[index][static_cast<std::size_t>(ring)], rank,
          settings = role_.ring_settings(ring), region = regions_[index]] {
    return std::make_unique<io::ring_collective>(transport, rank, settings, region);
  };
}

data_loader_settings training_run::loader_settings(int rank) const {
  data_loader_settings d;
  d.dataset = dataset_;
  d.mask_probability = config_.data.mask_probability;
  d.token_weights = masking_weights_;
  d.max_ngram = static_cast<int32_t>(config_.data.max_ngram);
  d.word_continuations = word_continuations_;
  d.seed = config_.seed;
  d.rank = static_cast<uint64_t>(rank);
  d.world = static_cast<uint64_t>(world_);
  d.micro_size = static_cast<uint64_t>(config_.micro_batch_size);
  d.window_samples = static_cast<uint64_t>(config_.train_batch_size);
  d.start_position = start_.next_position;
  d.windows = static_cast<uint64_t>(windows_);
  d.start_step = start_.optimizer_steps;
  d.faults = faults_;
  d.own_share_counts = config_.sync.diloco_mode();
  if (!options_.record_samples.empty())
    d.sample_log = options_.record_samples /
                   ("rank-" + std::to_string(rank) + "-pid-" + std::to_string(::getpid()) + ".txt");
  return d;
}

}  // namespace troupe::actors
