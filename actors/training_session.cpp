#include "actors/training_session.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/actor_system_setup.hpp"
#include "actors/training_run.hpp"
#include "io/checkpoint/resume_compatibility.hpp"
#include "messages/error.hpp"

namespace troupe::actors {

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
  options.reduce_bucket_elements = config.reduce_bucket_size;
  if (config.task) options.task = config.task->head;
  if (config.sync.diloco_mode()) options.diloco = config.sync.diloco;
  return options;
}

/// Resuming builds the local workers' trainers here and reads the checkpoint straight into the
/// first one's parameter and optimizer buffers: no fresh tensors for the kernel to zero and no
/// second copy into the model (measured: resume of 1 GiB 2.4-3.3 s into new tensors, about the
/// time to read the files into existing ones). The other local trainers copy from the first.
/// Checks that the checkpoint fits the data and the config before any worker starts.
resumed_run resume_trainers(const io::job_config& config, const session_options& options, const io::token_dataset& data,
                            const std::vector<compute::trainer_options>& workers, int world) {
  resumed_run run;
  if (options.resume.empty()) return run;
  const int local_workers = static_cast<int>(workers.size());
  for (const auto& trainer_options : workers) run.trainers.push_back(std::make_shared<compute::mlm_trainer>(trainer_options));
  io::load_targets in_place;
  for (auto& [name, tensor] : run.trainers.front()->named_parameters()) in_place.parameters.emplace(name, tensor);
  for (auto& [name, tensor] : run.trainers.front()->optimizer_buffers()) in_place.optimizer.emplace(name, tensor);
  std::vector<int64_t> own_ranks;  // DiLoCo: each reads its own part of the checkpoint
  for (const auto& trainer_options : workers) own_ranks.push_back(trainer_options.rank);
  run.contents =
      std::make_shared<io::checkpoint_contents>(io::load_for_resume(options.resume, options.run_dir, in_place, own_ranks));
  const auto& contents = *run.contents;
  const auto& dir = contents.dir;
  io::check_resume_compatible(contents, config, data.manifest(), data.identity());
  // Dropout masks are keyed by sample (seed, epoch, sample id, site): nothing to continue.
  // The first trainer's buffers hold what was read, and under streaming DiLoCo its load() puts
  // its own parameters over the model it read: it loads last.
  for (int local = local_workers - 1; local >= 0; --local)
    run.trainers[static_cast<std::size_t>(local)]->load(contents.parameters, contents.optimizer,
                                                      contents.state.optimizer_steps,
                                                      contents.state.loss_scale);  // no copy for the first
  if (config.sync.diloco_mode() && config.sync.diloco.fragments > 1 && contents.state.world_size != world) {
    spdlog::warn("resuming streaming DiLoCo on {} ranks from a checkpoint of {}: every fragment's round starts "
                 "again from the round start (the ranks' own parameters and round weights were another world's)",
                 world, contents.state.world_size);
    for (auto& trainer : run.trainers) trainer->restart_rounds_from_start();
  }
  spdlog::info("resuming from {} (step {}, data position {})", dir.string(), contents.state.optimizer_steps,
               contents.state.next_position);
  return run;
}

training_summary run_training(io::job_config config, const session_options& options) {
  caf::actor_system_config system_config;
  configure_actor_system(system_config);
  caf::actor_system system{system_config};
  caf::scoped_actor supervisor{system};
  return run_training(system, supervisor, std::move(config), options, cluster_role::alone());
}

cluster_role cluster_role::alone() {
  cluster_role role;
  role.transports.resize(1);  // one local worker, no rings
  return role;
}

io::ring_settings cluster_role::ring_settings(int ring) const {
  io::ring_settings settings;
  settings.order = ring_orders.at(static_cast<std::size_t>(ring));
  settings.ring_index = ring;
  settings.chunk_bytes = chunk_bytes;
  settings.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(collective_timeout);
  settings.generation = generation;
  return settings;
}

training_summary run_training(caf::actor_system& system, caf::scoped_actor& supervisor, io::job_config config,
                              const session_options& options, const cluster_role& role) {
  auto outcome = training_run(system, supervisor, std::move(config), options, role, nullptr).execute();
  TROUPE_ENFORCE(outcome.summary.has_value(), "a run without a membership generation ended without a summary");
  return *outcome.summary;
}

generation_outcome run_generation(caf::actor_system& system, caf::scoped_actor& supervisor, io::job_config config,
                                  const session_options& options, const cluster_role& role, carried_state& carried) {
  return training_run(system, supervisor, std::move(config), options, role, &carried).execute();
}

}  // namespace troupe::actors
