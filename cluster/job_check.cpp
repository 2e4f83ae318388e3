#include "cluster/job_check.hpp"

#include "io/checkpoint/teacher_checkpoint.hpp"
#include "io/data/token_dataset.hpp"
#include "messages/error.hpp"

namespace troupe::cluster {

io::job_config check_job(const cluster_manifest& manifest, const std::string& config_file) {
  auto config = io::load_job_config(config_file, manifest.world_size());
  const io::token_dataset data(config.data.dir, "train");
  io::reconcile_with_data(config, data.manifest(), config_file);
  // A node joining an elastic job copies the replicas' parameters and moments, not yet the
  // loss scaler's state, and ranks at different scales would sum unlike gradients.
  if (config.fp16 && manifest.faults.policy == fault_policy::elastic)
    throw make_error(config_file, ": fp16.enabled: false with ", manifest.source,
                     ": faults.policy \"elastic\" (a rejoining node cannot take over the loss scaler's state yet; use "
                     "bf16, or faults.policy \"abort\" or \"restart\")");
  // A new generation would need every survivor's communicators rebuilt mid-run; not yet.
  if (manifest.transport == "nccl" && manifest.faults.policy == fault_policy::elastic)
    throw make_error(manifest.source, ": transport: \"nccl\" with faults.policy \"elastic\" (NCCL rings are not re-planned "
                     "after a node loss yet; use faults.policy \"abort\" or \"restart\")");
  if (config.distillation.enabled)  // refused here, before any node starts
    io::load_teacher_checkpoint(config.distillation, config.model, data.manifest(), config_file);
  return config;
}

}  // namespace troupe::cluster
