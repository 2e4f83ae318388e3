#include "actors/training_session.hpp"

#include <caf/all.hpp>
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <spdlog/spdlog.h>

#include "actors/checkpointer.hpp"
#include "actors/data_loader.hpp"
#include "actors/metrics.hpp"
#include "actors/metrics_hub.hpp"
#include "actors/reducer.hpp"
#ifdef TROUPE_HAS_NCCL
#include "actors/nccl_reducer.hpp"
#endif
#include "actors/worker.hpp"
#include "cluster/fault_injection.hpp"
#include "compute/bert_config.hpp"
#include "compute/borrowed_tensor.hpp"
#include "compute/device_check.hpp"
#include "io/checkpoint/resume_compatibility.hpp"
#include "io/checkpoint/run_directory.hpp"
#include "io/checkpoint/teacher_checkpoint.hpp"
#include "io/comm/shared_region.hpp"
#include "io/data/token_dataset.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"
#include "messages/error_code.hpp"
#include "messages/type_registration.hpp"

namespace troupe::actors {
namespace {

compute::trainer_options trainer_options_of(const io::job_config& config,
                                            std::shared_ptr<const compute::teacher_setup> teacher) {
  compute::trainer_options options;
  options.teacher = std::move(teacher);
  options.model = config.model;
  options.optimizer = config.optimizer;
  options.schedule = config.scheduler;
  options.gradient_clipping = config.gradient_clipping;
  options.bf16 = config.bf16;
  options.fp16 = config.fp16;
  if (config.fp16) options.loss_scaling = config.loss_scaling;
  options.device = config.runtime.device;
  options.seed = config.seed;
  options.threads = config.runtime.threads;
  return options;
}

/// What resuming prepared: the checkpoint's contents and every local worker's trainer holding it.
struct resumed_run {
  std::shared_ptr<io::checkpoint_contents> contents;
  std::vector<std::shared_ptr<compute::mlm_trainer>> trainers;  ///< by local worker
};

/// Resuming builds the local workers' trainers here and reads the checkpoint straight into the
/// first one's parameter and optimizer buffers: no fresh tensors for the kernel to zero and no
/// second copy into the model (measured: resume of 1 GiB 2.4-3.3 s into new tensors, about the
/// time to read the files into existing ones). The other local trainers copy from the first.
/// Checks that the checkpoint fits the data and the config before any worker starts.
resumed_run resume_trainers(const io::job_config& config, const session_options& options, const io::token_dataset& data,
                            const std::vector<compute::trainer_options>& workers) {
  resumed_run run;
  if (options.resume.empty()) return run;
  const int local_workers = static_cast<int>(workers.size());
  for (const auto& trainer_options : workers) run.trainers.push_back(std::make_shared<compute::mlm_trainer>(trainer_options));
  io::load_targets in_place;
  for (auto& [name, tensor] : run.trainers.front()->named_parameters()) in_place.parameters.emplace(name, tensor);
  for (auto& [name, tensor] : run.trainers.front()->optimizer_buffers()) in_place.optimizer.emplace(name, tensor);
  run.contents = std::make_shared<io::checkpoint_contents>(io::load_for_resume(options.resume, options.run_dir, in_place));
  const auto& contents = *run.contents;
  const auto& dir = contents.dir;
  io::check_resume_compatible(contents, config, data.manifest(), data.identity());
  // Dropout masks are keyed by sample (seed, epoch, sample id, site): nothing to continue.
  for (int local = 0; local < local_workers; ++local)
    run.trainers[static_cast<std::size_t>(local)]->load(contents.parameters, contents.optimizer,
                                                      contents.state.optimizer_steps,
                                                      contents.state.loss_scale);  // no copy for the first
  spdlog::info("resuming from {} (step {}, data position {})", dir.string(), contents.state.optimizer_steps,
               contents.state.next_position);
  return run;
}

}  // namespace

void configure_actor_system(caf::actor_system_config& config) {
  messages::register_types(config);
  config.set("scheduler.max-threads", 2);
  config.set("logger.verbosity", caf::atom("quiet"));
}

messages::training_summary run_training(io::job_config config, const session_options& options) {
  caf::actor_system_config system_config;
  configure_actor_system(system_config);
  caf::actor_system system{system_config};
  caf::scoped_actor supervisor{system};
  return run_training(system, supervisor, std::move(config), options, nullptr);
}

namespace {

bool is_collective_failure(const caf::error& reason) {
  return reason.category() == caf::atom("troupe") &&
         (reason.code() == static_cast<uint8_t>(messages::errc::collective_failed) ||
          reason.code() == static_cast<uint8_t>(messages::errc::timed_out));
}

}  // namespace

namespace {

/// One run of run_training below, as named steps over the state they share: check, prepare
/// the trainers, take the run directory, resume, spawn the actors, wait, stop.
class training_run {
 public:
  training_run(caf::actor_system& system, caf::scoped_actor& supervisor, io::job_config config,
               const session_options& options, const cluster_role* role, carried_state* carried)
      : carried_(carried),
        continuing_(carried != nullptr && !carried->trainers.empty()),
        system_(system),
        supervisor_(supervisor),
        config_(std::move(config)),
        options_(options),
        role_(role),
        world_(role ? role->world : 1),
        first_rank_(role ? role->first_rank : 0),
        local_workers_(role ? static_cast<int>(role->transports.size()) : 1),
        reports_(first_rank_ == 0) {}  // global rank 0 writes checkpoints

  generation_outcome execute() {
    check_inputs();
    prepare_trainers();
    check_staging_fits();
    // A resume is checked (and loaded) before the run directory is taken, so a refused resume
    // leaves nothing behind; a fresh start takes it first, to check it holds no older run. A
    // new membership generation goes on from the trainers it carries, in the same directory.
    if (!continuing_) {
      // A later generation's replicas copy their state from a live one: nothing to read.
      if (!options_.resume.empty() && !later_generation())
        resumed_ = resume_trainers(config_, options_, *dataset_, trainers_);
      hold_run_directory();
    }
    set_start_state();
    spawn_reporters();
    for (int local = 0; local < local_workers_; ++local) spawn_rank(local);
    for (const auto& actor : {metrics_actor_, checkpoint_actor_, hub_})
      if (actor) spawned_.push_back(actor);
    for (const auto& actor : spawned_) supervisor_->monitor(actor);
    if (role_ && role_->coordinator) supervisor_->monitor(role_->coordinator);
    generation_outcome outcome;
    outcome.summary = await_summaries();
    if (next_generation_ && failure_.empty()) {
      hand_over();
      outcome.summary.reset();
      outcome.next_generation = *next_generation_;
      outcome.reason = replan_reason_;
      return outcome;
    }
    stop();
    if (!failure_.empty()) throw error(failure_);
    return outcome;
  }

 private:
  /// The config against the data and the device, before anything is built.
  void check_inputs() {
    if (options_.steps) config_.set_train_steps(*options_.steps);
    dataset_ = std::make_shared<const io::token_dataset>(config_.data.dir, "train");
    io::reconcile_with_data(config_, dataset_->manifest(), "config");
    if (nccl()) {
      // The manifest's devices place the workers (transport "nccl"); the config's runtime.device
      // is for single-process runs.
      for (int device : role_->cuda_devices)
        compute::check_device("cuda:" + std::to_string(device), "manifest: nodes[" + role_->node + "].devices");
    } else {
      compute::check_device(config_.runtime.device, "config: runtime.device");
      // Over UCX or shared memory the rings sum host memory: a GPU trains one worker alone.
      if (config_.runtime.device != "cpu" && world_ > 1)
        throw make_error("config: runtime.device: \"", config_.runtime.device, "\" with ", world_,
                         " workers: the ucx transport sums host memory; GPU workers need the manifest's transport "
                         "\"nccl\" with a cuda device per worker (nodes[].devices)");
    }
    if (config_.data.mlm_smoothing > 0)  // counted once, shared by this process's loaders
      masking_weights_ = io::smoothed_masking_weights(*dataset_, config_.data.mlm_smoothing);
    // The teacher is read once per process; a later generation's trainers carry it.
    if (config_.distillation.enabled && !continuing_) {
      teacher_ = io::load_teacher_checkpoint(config_.distillation, config_.model, dataset_->manifest(), "config");
      log_teacher();
    }
    if (config_.eval_every_windows > 0) {
      const auto* held_out = dataset_->manifest().find_split("validation");
      if (held_out == nullptr || held_out->sequences == 0)
        throw make_error("config: eval_every_windows: ", config_.data.dir.string(),
                         " has no validation split to evaluate on (prepare the data with --validation-fraction, or "
                         "set 0)");
      validation_ = std::make_shared<const io::token_dataset>(config_.data.dir, "validation");
      eval_batches_ = std::make_shared<const io::mlm_batch_builder>(*validation_, config_.data.mask_probability, config_.seed);
    }
    seams_ = worker_test_seams::from_environment();
    if (role_ && !role_->restarted) {  // a restarted node runs without the faults of its first run
      faults_ = cluster::faults_for_node(role_->node);
      for (const auto& fault : faults_) {
        if (fault.kind == cluster::fault_kind::slow && !fault.phase_given) {
          seams_.slow_window = fault.window;
          seams_.slow_seconds = static_cast<double>(fault.slow_ms) / 1000.0;
        }
      }
    }
  }

  /// Each local worker's trainer options; with rings on one host, its gradient lives in a shared
  /// region that its reducers offer to their rings (io/comm/ring_allreduce_shared.cpp).
  void prepare_trainers() {
    regions_.resize(static_cast<std::size_t>(local_workers_));
    if (continuing_) regions_ = carried_->regions;  // the trainers' gradients live in them
    for (int local = 0; local < local_workers_; ++local) {
      auto trainer = trainer_options_of(config_, teacher_);
      trainer.rank = first_rank_ + local;
      if (nccl()) trainer.device = "cuda:" + std::to_string(role_->cuda_devices[static_cast<std::size_t>(local)]);
      if (!continuing_ && role_ && role_->shared_memory && world_ > 1 && trainer.device == "cpu") {
        try {
          auto region = std::make_shared<io::shared_region>(
              static_cast<std::size_t>(compute::parameter_count(config_.model)) * sizeof(float),
              "rank " + std::to_string(trainer.rank) + "'s gradient buffer");
          trainer.gradient_buffer = [region](int64_t numel) {
            return compute::borrowed_float_tensor(region, region->data(), region->data_bytes(), numel);
          };
          regions_[static_cast<std::size_t>(local)] = std::move(region);
        } catch (const std::exception& e) {  // the rings agree on the transport instead
          spdlog::warn("{}; gradients go over the transport", e.what());
        }
      }
      trainers_.push_back(std::move(trainer));
    }
  }

  /// fp32 parameters and two optimizer moments are staged for each checkpoint.
  void check_staging_fits() const {
    const int64_t staged_bytes = 12 * compute::parameter_count(config_.model);
    if (options_.save_checkpoints && staged_bytes > config_.checkpoint.max_staging_bytes)
      throw make_error("config: checkpoint.max_staging_bytes: ", config_.checkpoint.max_staging_bytes,
                       " bytes cannot hold one staged copy of the parameters and optimizer moments (", staged_bytes,
                       " bytes)");
  }

  /// Everything the user could get wrong has been checked: from here on the run directory is
  /// this job's (see session_options::own_run_directory).
  void hold_run_directory() {
    if (!reports_) return;
    if (options_.own_run_directory) {
      run_directory_.emplace(options_.run_dir);
      if (options_.resume.empty()) io::prepare_fresh_run(options_.run_dir, options_.overwrite);
    }
    std::filesystem::create_directories(options_.run_dir);
  }

  /// Where training starts: the data's identity, and the resumed step and cursor.
  void set_start_state() {
    start_.seed = config_.seed;
    start_.world_size = world_;
    start_.vocab_hash = dataset_->manifest().vocab_hash;
    start_.dataset_size = dataset_->size();
    start_.data_identity = dataset_->identity();
    start_.sequence_length = dataset_->manifest().max_seq_length;
    if (continuing_) {
      start_.optimizer_steps = carried_->optimizer_steps;
      start_.next_position = carried_->next_position;
    } else if (resumed_.contents) {
      start_.optimizer_steps = resumed_.contents->state.optimizer_steps;
      start_.next_position = resumed_.contents->state.next_position;
    }
    // Injected faults count windows from where this process's run began.
    run_start_steps_ = continuing_ ? carried_->run_start_steps : start_.optimizer_steps;
    if (later_generation()) {
      // Every replica starts from the plan's step (copying a live replica's state); the data
      // cursor moves with it, one window of train_batch_size per step.
      const int64_t ahead = role_->start_steps - start_.optimizer_steps;
      start_.next_position += static_cast<uint64_t>(ahead) * static_cast<uint64_t>(config_.train_batch_size);
      start_.optimizer_steps = role_->start_steps;
    }
    windows_ = std::max<int64_t>(0, config_.train_steps - start_.optimizer_steps);
    if (role_)
      seams_.faults = fault_trigger(faults_, role_->node, options_.run_dir / "events.jsonl", run_start_steps_,
                                    role_->heartbeats_to_drop, role_->partitioned);
    if (options_.max_windows)
      windows_ = std::min(windows_, *options_.max_windows - (carried_ ? carried_->windows_done : 0));
  }

  /// The node's metrics actor (its batches go to the head's hub through the coordinator, or to
  /// this run's own hub), and global rank 0's checkpointer.
  void spawn_reporters() {
    if (!options_.metrics_wanted()) {
      if (reports_) checkpoint_actor_ = system_.spawn<caf::detached>(checkpointer, options_.run_dir, seams_.faults, caf::actor{});
      return;
    }
    if (!role_) {
      hub_ = start_metrics_hub(system_, hub_settings_for(config_, options_, world_)).actor;
    }
    metrics_settings metric_options;
    metric_options.route = role_ ? role_->coordinator : hub_;
    metric_options.local_workers = local_workers_;
    metric_options.warnings = warning_log::attach();
    if (role_) {
      metric_options.node = role_->node;
      metric_options.generation = role_->generation;
    }
    metrics_actor_ = system_.spawn(metrics, metric_options);
    if (reports_) checkpoint_actor_ = system_.spawn<caf::detached>(checkpointer, options_.run_dir, seams_.faults, metrics_actor_);
  }

  /// One local worker: its reducers (one per ring), the worker, its data loader.
  void spawn_rank(int local) {
    const int rank = first_rank_ + local;
    worker_settings w;
    w.trainer = trainers_[static_cast<std::size_t>(local)];
    w.rank = rank;
    w.world = world_;
    w.prefetch = config_.data.prefetch;
    w.windows = windows_;
    w.checkpoint_every = config_.checkpoint.every_windows;
    w.checkpoint_keep = config_.checkpoint.keep;
    w.reports = reports_ && local == 0;
    w.save_checkpoints = options_.save_checkpoints && w.reports;
    w.skip_checkpoint_when_busy = config_.checkpoint.skip_when_busy;
    w.checkpoint_timeout = options_.checkpoint_timeout;
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
    w.distilling = config_.distillation.enabled;
    if (eval_batches_) {
      w.eval_every = config_.eval_every_windows;
      w.eval_samples = std::min<uint64_t>(static_cast<uint64_t>(config_.eval_samples), validation_->size());
      w.eval_micro_size = config_.micro_batch_size;
      w.eval_batches = eval_batches_;
    }
    w.seams = seams_;
    if (role_) {
      if (later_generation()) w.synchronise_to_steps = role_->start_steps;
      w.collective_timeout = role_->collective_timeout;
      w.reducers = spawn_reducers(local, rank);
    }
    auto worker_actor = system_.spawn<caf::detached>(worker, w, metrics_actor_,
                                                     w.save_checkpoints ? checkpoint_actor_ : caf::actor{},
                                                     caf::actor_cast<caf::actor>(supervisor_));
    auto loader_actor = system_.spawn<caf::detached>(data_loader, loader_settings(rank));
    spawned_.push_back(worker_actor);
    spawned_.push_back(loader_actor);
    supervisor_->send(worker_actor, messages::start_atom::value, loader_actor);
  }

  std::vector<caf::actor> spawn_reducers(int local, int rank) {
    if (nccl()) return spawn_nccl_reducers(local, rank);
    std::vector<caf::actor> reducers;
    for (std::size_t ring = 0; ring < role_->ring_orders.size(); ++ring) {
      reducer_settings r;
      r.transport = role_->transports[static_cast<std::size_t>(local)][ring];
      r.rank = rank;
      r.ring = role_->ring_settings(static_cast<int>(ring));
      r.region = regions_[static_cast<std::size_t>(local)];
      r.faults = seams_.faults;
      r.session = caf::actor_cast<caf::actor>(supervisor_);
      reducers.push_back(system_.spawn<caf::detached>(reducer, r));
      spawned_.push_back(reducers.back());
      reducers_.insert(reducers.back().address());
    }
    return reducers;
  }

  bool nccl() const { return role_ != nullptr && !role_->nccl_ids.empty(); }

  /// One NCCL communicator per ring per worker (transport "nccl"), each reducing its ring's
  /// slice of the worker's gradient on the worker's GPU.
  std::vector<caf::actor> spawn_nccl_reducers(int local, int rank) {
    std::vector<caf::actor> reducers;
#ifdef TROUPE_HAS_NCCL
    for (std::size_t ring = 0; ring < role_->nccl_ids.size(); ++ring) {
      nccl_reducer_settings r;
      r.id = role_->nccl_ids[ring];
      r.world = world_;
      r.rank = rank;
      r.device = role_->cuda_devices[static_cast<std::size_t>(local)];
      r.ring_index = static_cast<int>(ring);
      r.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(role_->collective_timeout);
      r.faults = seams_.faults;
      reducers.push_back(system_.spawn<caf::detached>(nccl_reducer, r));
      spawned_.push_back(reducers.back());
      reducers_.insert(reducers.back().address());
    }
#else
    (void)local;
    (void)rank;
    throw error("transport \"nccl\": this troupe was built without NCCL");
#endif
    return reducers;
  }

  data_loader_settings loader_settings(int rank) const {
    data_loader_settings d;
    d.dataset = dataset_;
    d.mask_probability = config_.data.mask_probability;
    d.token_weights = masking_weights_;
    d.max_ngram = static_cast<int32_t>(config_.data.max_ngram);
    d.seed = config_.seed;
    d.rank = static_cast<uint64_t>(rank);
    d.world = static_cast<uint64_t>(world_);
    d.micro_size = static_cast<uint64_t>(config_.micro_batch_size);
    d.window_samples = static_cast<uint64_t>(config_.train_batch_size);
    d.start_position = start_.next_position;
    d.windows = static_cast<uint64_t>(windows_);
    d.start_step = start_.optimizer_steps;
    d.faults = seams_.faults;
    if (const char* record = std::getenv("TROUPE_TEST_RECORD_SAMPLES"))
      d.sample_log = std::filesystem::path(record) /
                     ("rank-" + std::to_string(rank) + "-pid-" + std::to_string(::getpid()) + ".txt");
    return d;
  }

  /// Waits for every local worker's summary; any actor going down with a reason first is the
  /// failure to report. Each finished window restarts the timeout, so it bounds one window.
  std::optional<messages::training_summary> await_summaries() {
    std::optional<messages::training_summary> summary;
    int summaries = 0;
    int64_t last_step = start_.optimizer_steps;  // of the newest window report
    while (summaries < local_workers_ && failure_.empty() && !next_generation_) {
      supervisor_->receive(
          [&](messages::done_atom, messages::training_summary& s) {
            if (summaries++ == 0) summary = std::move(s);
          },
          [&](messages::window_atom, const messages::window_report& report) { note_window(report, last_step); },
          [&](messages::abort_atom, const std::string& reason) { failure_ = reason; },
          [&](messages::suspect_atom, int32_t peer, const std::string& reason) {
            // A ring peer that stays silent while the head still hears it (a broken link): let
            // the head decide; under "abort" the ring's own failure stops the job anyway. Only
            // this generation's reducers speak for it (ranks are renumbered in the next).
            if (reducers_.count(caf::actor_cast<caf::actor_addr>(supervisor_->current_sender())) == 0) return;
            if (role_ && role_->elastic && role_->coordinator)
              supervisor_->send(role_->coordinator, messages::suspect_atom::value, role_->node, role_->generation, peer,
                                reason);
          },
          [&](messages::membership_atom, uint64_t generation, const std::string& reason) {
            if (!role_ || generation <= role_->generation) return;  // an older generation's news
            next_generation_ = generation;
            replan_reason_ = reason;
          },
          [&](caf::down_msg& down) {
            gone_.insert(down.source);
            if (role_ && down.source == role_->coordinator)
              failure_ =
                  "the head node's coordinator at " + role_->head + " went down (" + system_.render(down.reason) + ")";
            else if (down.reason && role_ && role_->elastic && is_collective_failure(down.reason))
              await_lost_node(system_.render(down.reason));
            else if (down.reason)
              failure_ = system_.render(down.reason);
          },
          caf::after(next_wait()) >> [&] {
            if (!lost_peer_failure_.empty()) {
              failure_ = lost_peer_failure_ + " (and the head named no lost node within " +
                         std::to_string(lost_peer_wait().count()) + " ms)";
              return;
            }
            failure_ = "the window of step " + std::to_string(last_step + 1) +
                       " did not finish within the window timeout of " +
                       std::to_string(options_.window_timeout.count()) +
                       " s: no report from the workers (a worker stalled, its data loader starved, or a ring peer "
                       "stopped answering)";
          });
      if (next_generation_) return std::nullopt;
    }
    if (summary && metrics_actor_) {
      // Every report of this node reaches the hub before the node says it finished.
      supervisor_->request(metrics_actor_, std::chrono::seconds(60), messages::flush_atom::value, true, int64_t{0})
          .receive([] {}, [&](caf::error& e) { failure_ = system_.render(e); });
      finish_metrics_hub(supervisor_, hub_);
    }
    return summary;
  }

  bool later_generation() const { return role_ && role_->generation > 0; }

  /// What the teacher costs each worker: its memory here, its time in every window's report.
  void log_teacher() const {
    int64_t bytes = 0;
    for (const auto& [name, tensor] : teacher_->parameters) bytes += tensor.numel() * tensor.element_size();
    spdlog::info("distilling from {} ({} {}-layer, {:.1f} MB of parameters per worker, frozen)",
                 config_.distillation.teacher, teacher_->model.model_type, teacher_->model.num_hidden_layers,
                 static_cast<double>(bytes) / 1e6);
  }

  void note_window(const messages::window_report& report, int64_t& last_step) {
    last_step = report.step;
    if (report.rank == first_rank_) losses_.push_back(report.loss);
  }

  // Under faults.policy "elastic" a ring that fails because a peer died is not yet the job's
  // failure: the head declares the node lost within its heartbeat timeout and announces the
  // next generation. The session waits that long (twice, plus slack) before it gives up.
  std::chrono::milliseconds lost_peer_wait() const { return 2 * role_->heartbeat + std::chrono::seconds(5); }

  void await_lost_node(const std::string& failure) {
    if (!lost_peer_failure_.empty()) return;
    lost_peer_failure_ = failure;
    lost_peer_deadline_ = std::chrono::steady_clock::now() + lost_peer_wait();
  }

  std::chrono::milliseconds next_wait() const {
    if (lost_peer_failure_.empty()) return options_.window_timeout;
    const auto left = lost_peer_deadline_ - std::chrono::steady_clock::now();
    return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(left));
  }

  /// The end of a generation (see run_generation): stops every actor, waits until all are gone
  /// (none may touch a trainer or a transport afterwards), and leaves the trainers, discarded
  /// of the window in flight, to `carried_`.
  void hand_over() {
    abort_transports("membership generation " + std::to_string(role_->generation) + " ended: " + replan_reason_);
    std::set<caf::actor_addr> running;
    for (const auto& actor : spawned_) {
      if (gone_.count(actor.address()) == 0) running.insert(actor.address());  // its down was read already
      supervisor_->send_exit(actor, caf::exit_reason::user_shutdown);
    }
    int64_t last_step = 0;
    std::string aborted;  // the head gave up while this node stopped
    const auto limit = options_.checkpoint_timeout + std::chrono::seconds(30);  // a save may be finishing
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!running.empty()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        throw make_error("ending membership generation ", role_->generation, ": ", running.size(),
                         " actor(s) did not stop within ", limit.count(), " s");
      supervisor_->receive([&](caf::down_msg& down) { running.erase(down.source); },
                           [&](messages::window_atom, const messages::window_report& report) { note_window(report, last_step); },
                           [&](messages::done_atom, messages::training_summary&) {},
                           [&](messages::abort_atom, const std::string& reason) { aborted = reason; },
                           [&](messages::suspect_atom, int32_t, const std::string&) {},  // this generation's: moot
                           caf::after(left) >> [] {});
    }
    if (role_->coordinator) supervisor_->demonitor(role_->coordinator);
    if (!aborted.empty()) throw error(aborted);
    carried_->trainers.clear();
    for (std::size_t local = 0; local < handoffs_.size(); ++local) {
      auto& trainer = *handoffs_[local];
      if (!trainer)
        throw make_error("ending membership generation ", role_->generation, ": the worker of rank ",
                         first_rank_ + static_cast<int>(local), " never built its model");
      trainer->discard_window();
      carried_->trainers.push_back(trainer);
    }
    const int64_t steps = carried_->trainers.front()->optimizer_steps();
    for (std::size_t local = 1; local < carried_->trainers.size(); ++local)
      if (carried_->trainers[local]->optimizer_steps() != steps)
        throw make_error("ending membership generation ", role_->generation, ": the workers of node ", role_->node,
                         " stopped at different steps (", steps, " and ", carried_->trainers[local]->optimizer_steps(),
                         "): the lost node failed during an allreduce that some ranks finished");
    carried_->regions = regions_;
    carried_->windows_done += steps - start_.optimizer_steps;
    carried_->optimizer_steps = steps;
    carried_->next_position = start_.next_position + static_cast<uint64_t>(steps - start_.optimizer_steps) *
                                                         static_cast<uint64_t>(config_.train_batch_size);
    carried_->losses = losses_;
    carried_->run_start_steps = run_start_steps_;
  }

  /// Makes every wait on this process's ring transports fail now, naming `reason`.
  void abort_transports(const std::string& reason) {
    for (const auto& worker : role_->transports)
      for (const auto& transport : worker) transport->abort(reason);
  }

  void stop() {
    // Reducers blocked on a peer that failed would wait out the collective timeout before they
    // see their exit: aborting the transports ends those waits now.
    if (role_ && !failure_.empty()) abort_transports(failure_);
    if (hub_ && !failure_.empty())  // the windows finished before the failure keep their lines
      supervisor_->request(hub_, std::chrono::seconds(3), messages::flush_atom::value).receive([] {}, [](caf::error&) {});
    for (const auto& actor : spawned_) supervisor_->send_exit(actor, caf::exit_reason::user_shutdown);
    if (role_ && role_->coordinator) supervisor_->demonitor(role_->coordinator);
  }

  carried_state* carried_;  ///< between generations of a cluster job; null for one process
  const bool continuing_;   ///< carried_ holds a previous generation's trainers
  caf::actor_system& system_;
  caf::scoped_actor& supervisor_;
  io::job_config config_;
  const session_options& options_;
  const cluster_role* role_;
  const int world_;
  const int first_rank_;
  const int local_workers_;
  const bool reports_;

  std::shared_ptr<const io::token_dataset> dataset_;
  std::shared_ptr<const io::token_dataset> validation_;        ///< eval_every_windows' held-out data
  std::shared_ptr<const io::mlm_batch_builder> eval_batches_;  ///< (uses validation_)
  worker_test_seams seams_;
  std::vector<compute::trainer_options> trainers_;
  std::vector<std::shared_ptr<io::shared_region>> regions_;
  std::shared_ptr<const compute::teacher_setup> teacher_;  ///< distillation's, read by check_inputs
  std::shared_ptr<const std::vector<double>> masking_weights_;  ///< data.mlm_smoothing's, or null
  std::optional<io::run_directory_lock> run_directory_;
  resumed_run resumed_;
  io::training_state start_;
  int64_t run_start_steps_ = 0;  ///< the step this process's run began at (before any generation)
  std::vector<cluster::injected_fault> faults_;  ///< this node's, from TROUPE_INJECT
  int64_t windows_ = 0;
  caf::actor metrics_actor_, checkpoint_actor_;
  caf::actor hub_;  ///< a single-process run's own metrics hub (a cluster's is on the head)
  std::vector<caf::actor> spawned_;  ///< every actor of the run: monitored, and stopped at the end
  std::vector<std::shared_ptr<std::shared_ptr<compute::mlm_trainer>>> handoffs_;  ///< by local worker
  std::vector<double> losses_;  ///< of this process's first worker's windows
  std::string failure_;
  std::optional<uint64_t> next_generation_;  ///< announced by the coordinator
  std::string replan_reason_;
  std::set<caf::actor_addr> gone_;  ///< actors whose down message the session has read
  std::set<caf::actor_addr> reducers_;  ///< this generation's reducers (whose suspicions count)
  std::string lost_peer_failure_;  ///< a ring failed; waiting for the head to name the lost node
  std::chrono::steady_clock::time_point lost_peer_deadline_;
};

}  // namespace

io::ring_settings cluster_role::ring_settings(int ring) const {
  io::ring_settings settings;
  settings.order = ring_orders.at(static_cast<std::size_t>(ring));
  settings.ring_index = ring;
  settings.chunk_bytes = chunk_bytes;
  settings.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(collective_timeout);
  settings.generation = generation;
  return settings;
}

messages::training_summary run_training(caf::actor_system& system, caf::scoped_actor& supervisor,
                                        io::job_config config, const session_options& options,
                                        const cluster_role* role) {
  auto outcome = training_run(system, supervisor, std::move(config), options, role, nullptr).execute();
  TROUPE_ENFORCE(outcome.summary.has_value(), "a run without a membership generation ended without a summary");
  return *outcome.summary;
}

generation_outcome run_generation(caf::actor_system& system, caf::scoped_actor& supervisor, io::job_config config,
                                  const session_options& options, const cluster_role& role, carried_state& carried) {
  return training_run(system, supervisor, std::move(config), options, &role, &carried).execute();
}

}  // namespace troupe::actors
