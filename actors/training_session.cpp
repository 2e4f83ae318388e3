#include "actors/training_session.hpp"

#include <caf/all.hpp>
#include <unistd.h>

#include <cstdlib>
#include <spdlog/spdlog.h>

#include "actors/checkpointer.hpp"
#include "actors/data_loader.hpp"
#include "actors/metrics.hpp"
#include "actors/reducer.hpp"
#include "actors/worker.hpp"
#include "compute/borrowed_tensor.hpp"
#include "compute/device_check.hpp"
#include "compute/error.hpp"
#include "compute/staging_buffer.hpp"
#include "io/shared_region.hpp"
#include "io/token_dataset.hpp"
#include "messages/atoms.hpp"
#include "messages/type_registration.hpp"
#include "messages/error_code.hpp"

namespace troupe::actors {
namespace {

compute::trainer_options trainer_options_of(const io::job_config& config) {
  compute::trainer_options options;
  options.model = config.model;
  options.optimizer = config.optimizer;
  options.schedule = config.scheduler;
  options.gradient_clipping = config.gradient_clipping;
  options.bf16 = config.bf16;
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
resumed_run resume_trainers(const io::job_config& config, const session_options& options,
                            const io::dataset_manifest& data, const std::vector<compute::trainer_options>& workers) {
  resumed_run run;
  if (options.resume.empty()) return run;
  const int first_rank = static_cast<int>(workers.front().rank);
  const int local_workers = static_cast<int>(workers.size());
  for (const auto& trainer_options : workers) run.trainers.push_back(std::make_shared<compute::mlm_trainer>(trainer_options));
  io::load_targets in_place;
  for (auto& [name, tensor] : run.trainers.front()->named_parameters()) in_place.parameters.emplace(name, tensor);
  for (auto& [name, tensor] : run.trainers.front()->optimizer_buffers()) in_place.optimizer.emplace(name, tensor);
  run.contents = std::make_shared<io::checkpoint_contents>(io::load_for_resume(options.resume, options.run_dir, in_place));
  const auto& contents = *run.contents;
  const auto& dir = contents.dir;
  if (contents.state.vocab_hash != data.vocab_hash)
    throw make_error(dir.string(), ": the checkpoint was trained with vocabulary ", contents.state.vocab_hash,
                     ", the data uses ", data.vocab_hash);
  if (contents.model.hidden_size != config.model.hidden_size ||
      contents.model.num_hidden_layers != config.model.num_hidden_layers ||
      contents.model.vocab_size != config.model.vocab_size)
    throw make_error(dir.string(), ": the checkpoint's model sizes differ from the config's model section");
  // Every rank makes the same number of dropout calls, so a rank the checkpoint has no stream
  // for (only the writer's is saved) continues from the writer's count.
  const io::rng_state* writer_stream = nullptr;
  for (const auto& stream : contents.state.rng)
    if (stream.name.rfind("dropout/", 0) == 0 && !writer_stream) writer_stream = &stream;
  for (int local = 0; local < local_workers; ++local) {
    auto& trainer = *run.trainers[static_cast<std::size_t>(local)];
    trainer.load(contents.parameters, contents.optimizer, contents.state.optimizer_steps);  // no copy for the first
    const io::rng_state* own = writer_stream;
    for (const auto& stream : contents.state.rng)
      if (stream.name == io::dropout_stream_name(first_rank + local)) own = &stream;
    if (own) trainer.set_dropout_calls(own->counter);
  }
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

messages::training_summary run_training(caf::actor_system& system, caf::scoped_actor& supervisor,
                                        io::job_config config, const session_options& options,
                                        const cluster_role* role) {
  const int world = role ? role->world : 1;
  const int first_rank = role ? role->first_rank : 0;
  const int local_workers = role ? static_cast<int>(role->transports.size()) : 1;
  const bool reports = first_rank == 0;  // global rank 0 writes metrics and checkpoints

  if (options.steps) config.set_train_steps(*options.steps);
  auto dataset = std::make_shared<const io::token_dataset>(config.data.dir, "train");
  io::reconcile_with_data(config, dataset->manifest(), "config");
  compute::check_device(config.runtime.device, "config: runtime.device");
  // Each local worker's options; with rings on one host, its gradient lives in a shared region
  // that its reducers offer to their rings (io/ring_allreduce_shared.cpp).
  std::vector<compute::trainer_options> trainers;
  std::vector<std::shared_ptr<io::shared_region>> regions(static_cast<std::size_t>(local_workers));
  for (int local = 0; local < local_workers; ++local) {
    auto trainer = trainer_options_of(config);
    trainer.rank = first_rank + local;
    if (role && role->shared_memory && world > 1 && config.runtime.device == "cpu") {
      try {
        auto region = std::make_shared<io::shared_region>(
            static_cast<std::size_t>(compute::parameter_count(config.model)) * sizeof(float),
            "rank " + std::to_string(trainer.rank) + "'s gradient buffer");
        trainer.gradient_buffer = [region](int64_t numel) {
          return compute::borrowed_float_tensor(region, region->data(), region->data_bytes(), numel);
        };
        regions[static_cast<std::size_t>(local)] = std::move(region);
      } catch (const std::exception& e) {  // the rings agree on the transport instead
        spdlog::warn("{}; gradients go over the transport", e.what());
      }
    }
    trainers.push_back(std::move(trainer));
  }
  auto resumed = resume_trainers(config, options, dataset->manifest(), trainers);
  const auto& resume = resumed.contents;
  // fp32 parameters and two optimizer moments are staged for each checkpoint.
  const int64_t staged_bytes = 12 * compute::parameter_count(config.model);
  if (options.save_checkpoints && staged_bytes > config.checkpoint.max_staging_bytes)
    throw make_error("config: checkpoint.max_staging_bytes: ", config.checkpoint.max_staging_bytes,
                     " bytes cannot hold one staged copy of the parameters and optimizer moments (", staged_bytes,
                     " bytes)");

  io::training_state start;
  start.seed = config.seed;
  start.world_size = world;
  start.vocab_hash = dataset->manifest().vocab_hash;
  start.dataset_size = dataset->size();
  if (resume) {
    start.optimizer_steps = resume->state.optimizer_steps;
    start.next_position = resume->state.next_position;
  }
  int64_t windows = std::max<int64_t>(0, config.train_steps - start.optimizer_steps);
  if (options.max_windows) windows = std::min(windows, *options.max_windows);
  if (reports) std::filesystem::create_directories(options.run_dir);

  caf::actor metrics_actor, checkpoint_actor;
  if (reports) {
    metrics_settings metric_options;
    if (options.write_metrics) metric_options.jsonl = options.run_dir / "metrics.jsonl";
    metric_options.total_steps = config.train_steps;
    metric_options.steps_per_print = config.steps_per_print;
    metric_options.console = options.console;
    metric_options.progress_lines = options.progress_lines;
    metrics_actor = system.spawn(metrics, metric_options);
    checkpoint_actor = system.spawn<caf::detached>(checkpointer, options.run_dir);
  }

  std::vector<caf::actor> spawned;  // every actor of the run: monitored, and stopped at the end
  for (int local = 0; local < local_workers; ++local) {
    const int rank = first_rank + local;
    worker_settings w;
    w.trainer = trainers[static_cast<std::size_t>(local)];
    w.rank = rank;
    w.world = world;
    w.accumulation = config.gradient_accumulation_steps;
    w.prefetch = config.data.prefetch;
    w.windows = windows;
    w.checkpoint_every = config.checkpoint.every_windows;
    w.checkpoint_keep = config.checkpoint.keep;
    w.reports = reports && local == 0;
    w.save_checkpoints = options.save_checkpoints && w.reports;
    w.skip_checkpoint_when_busy = config.checkpoint.skip_when_busy;
    w.start = start;
    w.window_samples = static_cast<uint64_t>(config.train_batch_size);
    w.job = config.source;
    if (resume) w.resumed_trainer = std::move(resumed.trainers[static_cast<std::size_t>(local)]);
    w.sync_every_micro_batch = config.sync_every_micro_batch;
    if (role) {
      w.collective_timeout = role->collective_timeout;
      for (std::size_t ring = 0; ring < role->ring_orders.size(); ++ring) {
        reducer_settings r;
        r.transport = role->transports[static_cast<std::size_t>(local)][ring];
        r.rank = rank;
        r.ring.order = role->ring_orders[ring];
        r.ring.ring_index = static_cast<int>(ring);
        r.ring.chunk_bytes = role->chunk_bytes;
        r.ring.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(role->collective_timeout);
        r.region = regions[static_cast<std::size_t>(local)];
        w.reducers.push_back(system.spawn<caf::detached>(reducer, r));
        spawned.push_back(w.reducers.back());
      }
    }
    auto worker_actor = system.spawn<caf::detached>(worker, w, w.reports ? metrics_actor : caf::actor{},
                                                    w.save_checkpoints ? checkpoint_actor : caf::actor{},
                                                    caf::actor_cast<caf::actor>(supervisor));
    data_loader_settings d;
    d.dataset = dataset;
    d.mask_probability = config.data.mask_probability;
    d.seed = config.seed;
    d.rank = static_cast<uint64_t>(rank);
    d.world = static_cast<uint64_t>(world);
    d.micro_size = static_cast<uint64_t>(config.micro_batch_size);
    d.accumulation = static_cast<uint64_t>(config.gradient_accumulation_steps);
    d.start_position = start.next_position;
    d.windows = static_cast<uint64_t>(windows);
    if (const char* record = std::getenv("TROUPE_TEST_RECORD_SAMPLES"))
      d.sample_log = std::filesystem::path(record) /
                     ("rank-" + std::to_string(rank) + "-pid-" + std::to_string(::getpid()) + ".txt");
    auto loader_actor = system.spawn<caf::detached>(data_loader, d);
    spawned.push_back(worker_actor);
    spawned.push_back(loader_actor);
    supervisor->send(worker_actor, messages::start_atom::value, loader_actor);
  }
  for (const auto& actor : {metrics_actor, checkpoint_actor})
    if (actor) spawned.push_back(actor);
  for (const auto& actor : spawned) supervisor->monitor(actor);
  if (role && role->coordinator) supervisor->monitor(role->coordinator);

  // Wait for every local worker's summary; any actor going down with a reason first is the
  // failure to report. Each finished window restarts the timeout, so it bounds one window.
  std::optional<messages::training_summary> summary;
  int summaries = 0;
  std::string failure;
  while (summaries < local_workers && failure.empty()) {
    supervisor->receive(
        [&](messages::done_atom, messages::training_summary& s) {
          if (summaries++ == 0) summary = std::move(s);
        },
        [&](messages::window_atom, const messages::window_report&) {},
        [&](messages::abort_atom, const std::string& reason) { failure = reason; },
        [&](caf::down_msg& down) {
          if (role && down.source == role->coordinator)
            failure = "the head node's coordinator at " + role->head + " went down (" + system.render(down.reason) + ")";
          else if (down.reason)
            failure = system.render(down.reason);
        },
        caf::after(options.window_timeout) >> [&] {
          failure = "no window finished within " + std::to_string(options.window_timeout.count()) +
                    " s (worker stalled or data loader starved)";
        });
  }
  if (summary && metrics_actor) {
    supervisor->request(metrics_actor, std::chrono::seconds(60), messages::flush_atom::value)
        .receive([] {}, [&](caf::error& e) { failure = system.render(e); });
  }
  for (const auto& actor : spawned) supervisor->send_exit(actor, caf::exit_reason::user_shutdown);
  if (role && role->coordinator) supervisor->demonitor(role->coordinator);
  if (!failure.empty()) throw error(failure);
  return *summary;
}

}  // namespace troupe::actors
