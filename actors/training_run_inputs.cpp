#include "actors/training_run.hpp"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "compute/bert_config.hpp"
#include "compute/borrowed_tensor.hpp"
#include "compute/device_check.hpp"
#include "io/checkpoint/pretrained_encoder.hpp"
#include "io/checkpoint/teacher_checkpoint.hpp"
#include "io/comm/shared_region.hpp"
#include "messages/error.hpp"

namespace troupe::actors {

/// The config against the data and the device, before anything is built.
void training_run::check_inputs() {
  if (options_.steps) config_.set_train_steps(*options_.steps);
  dataset_ = std::make_shared<const io::token_dataset>(config_.data.dir, "train");
  if (config_.task && !config_.task->pretrained.empty()) {
    // Its sizes every generation (the config may leave the model to it), its tensors only when they start the run.
    const bool fresh = !continuing_ && options_.resume.empty();
    const auto pretrained = io::read_pretrained_encoder(config_, dataset_->manifest(), "config", fresh);
    pretrained_ = pretrained.parameters;
    if (fresh && writes_checkpoints_)
      spdlog::info("fine-tuning {} from {} ({} model)", compute::task_type_name(config_.task->head.type),
                   pretrained.dir.string(), config_.model.model_type);
  }
  io::reconcile_with_data(config_, dataset_->manifest(), "config");
  if (nccl()) {
    // The manifest's devices place the workers (transport "nccl"); the config's runtime.device
    // is for single-process runs.
    for (int device : role_.cuda_devices)
      compute::check_device("cuda:" + std::to_string(device), "manifest: nodes[" + role_.node + "].devices");
    // NCCL sums in the type it is given: 16 bits on the wire would mean 16-bit sums.
    for (const auto& [key, type] : {std::pair{"communication_data_type", config_.communication_data_type},
                                    std::pair{"sync.communication_data_type", config_.sync.diloco.communication_data_type}})
      if (type != "fp32")
        throw make_error("config: ", key, ": \"", type,
                         "\" needs the rings' own transport (ucx or shared memory), which sums in fp32 at every hop; "
                         "under transport \"nccl\" use \"fp32\"");
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
  if (config_.data.whole_word_masking)
    word_continuations_ = io::word_continuations_of(dataset_->manifest(), config_.data.dir);
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
}

/// Each local worker's trainer options; with rings on one host, its gradient lives in a shared
/// region that its reducers offer to their rings (io/comm/ring_allreduce_shared.cpp).
void training_run::prepare_trainers() {
  regions_.resize(static_cast<std::size_t>(local_workers_));
  if (continuing_) regions_ = carried_->regions;  // the trainers' gradients live in them
  for (int local = 0; local < local_workers_; ++local) {
    auto trainer = trainer_options_of(config_, teacher_);
    trainer.pretrained = pretrained_;
    trainer.rescale_pretrained_embeddings = config_.task && config_.task->rescale_embeddings;
    trainer.frozen_encoder_steps = config_.task ? config_.task->frozen_encoder_steps : 0;
    trainer.rank = first_rank_ + local;
    if (nccl()) trainer.device = "cuda:" + std::to_string(role_.cuda_devices[static_cast<std::size_t>(local)]);
    if (!continuing_ && role_.shared_memory && world_ > 1 && trainer.device == "cpu") {
      try {
        auto region = std::make_shared<io::shared_region>(
            static_cast<std::size_t>(gradient_elements() + outer_carrier_elements()) * sizeof(float),
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

std::optional<compute::task_head> training_run::task_head() const {
  return config_.task ? std::optional(config_.task->head) : std::nullopt;
}

int64_t training_run::gradient_elements() const { return compute::gradient_buffer_elements(config_.model, task_head()); }

/// An overlapped DiLoCo exchange's carrier holds one fragment (at most ⌈parameters / F⌉; the
/// gradient buffer's size is a bound on the parameters'); none without overlap.
int64_t training_run::outer_carrier_elements() const {
  const auto& sync = config_.sync;
  if (!sync.diloco_mode() || sync.diloco.overlap_steps == 0) return 0;
  return gradient_elements() / sync.diloco.fragments + 1;
}

/// Local worker `local`'s outer carrier: right after its gradient in its shared region (its
/// rings sum what lies there), else a buffer of its own on its trainer's device.
at::Tensor training_run::outer_carrier(int local, const std::string& device) const {
  const auto elements = outer_carrier_elements();
  if (elements == 0) return {};
  const auto& region = regions_[static_cast<std::size_t>(local)];
  if (!region) return at::zeros({elements}, at::TensorOptions().dtype(at::kFloat).device(device));
  const auto offset = static_cast<std::size_t>(gradient_elements()) * sizeof(float);
  return compute::borrowed_float_tensor(region, region->data() + offset, region->data_bytes() - offset, elements);
}

/// fp32 parameters and the optimizer's state are staged for each checkpoint (under DiLoCo the
/// writer's inner state and the outer momentum; the other ranks write their own parts).
void training_run::check_staging_fits() const {
  const bool diloco = config_.sync.diloco_mode();
  const int64_t copies = 1 + compute::optimizer_state_tensors(config_.optimizer) + (diloco ? 1 : 0);
  const int64_t staged_bytes = 4 * copies * compute::trained_parameter_count(config_.model, task_head());
  if (options_.save_checkpoints && staged_bytes > config_.checkpoint.max_staging_bytes)
    throw make_error("config: checkpoint.max_staging_bytes: ", config_.checkpoint.max_staging_bytes,
                     " bytes cannot hold one staged copy of the parameters and optimizer moments (", staged_bytes,
                     " bytes)");
}

/// Everything the user could get wrong has been checked: from here on the run directory is
/// this job's (see session_options::own_run_directory).
void training_run::hold_run_directory() {
  if (!writes_checkpoints_) return;
  if (options_.own_run_directory) {
    run_directory_.emplace(options_.run_dir);
    if (options_.resume.empty()) io::prepare_fresh_run(options_.run_dir, options_.overwrite);
  }
  std::filesystem::create_directories(options_.run_dir);
}

/// Where training starts: the data's identity, and the resumed step and cursor.
void training_run::set_start_state() {
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
  // A later generation starts from this replica's own step; before the first window the ranks
  // agree on the furthest one and copy a replica standing there (worker_state::start_at).
  windows_ = std::max<int64_t>(0, config_.train_steps - start_.optimizer_steps);
  faults_ = fault_trigger(options_.injected_faults, role_.node, options_.run_dir / "events.jsonl", run_start_steps_,
                         role_.heartbeats_to_drop, role_.partitioned);
  if (options_.max_windows)
    windows_ = std::min(windows_, *options_.max_windows - (carried_ ? carried_->windows_done : 0));
}

/// What the teacher costs each worker: its memory here, its time in every window's report.
void training_run::log_teacher() const {
  int64_t bytes = 0;
  for (const auto& [name, tensor] : teacher_->parameters) bytes += tensor.numel() * tensor.element_size();
  spdlog::info("distilling from {} ({} {}-layer, {:.1f} MB of parameters per worker, frozen)",
               config_.distillation.teacher, teacher_->model.model_type, teacher_->model.num_hidden_layers,
               static_cast<double>(bytes) / 1e6);
}

}  // namespace troupe::actors
