#pragma once
/// The compute of one data-parallel replica: model, flat buffers, optimizer, schedule.

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compute/bert_config.hpp"
#include "compute/distillation_config.hpp"
#include "compute/gradient_buckets.hpp"
#include "compute/loss_scaler.hpp"
#include "compute/mlm_batch.hpp"
#include "compute/mlm_evaluation.hpp"
#include "compute/named_tensors.hpp"
#include "compute/optimizer_config.hpp"
#include "compute/sync_config.hpp"
#include "compute/task_head.hpp"

namespace troupe::compute {

class flat_parameters;
class held_parameters;
class optimizer;
class outer_optimizer;
class word_lookup_gradient;
struct masked_lm_impl;
struct task_model_impl;

/// A teacher to distil from (the `distillation` block and the teacher's checkpoint).
struct teacher_setup {
  distillation_config distillation;
  bert_config model;
  named_tensors parameters;  ///< CPU, HF names; copied onto each trainer's device
};

struct trainer_options {
  bert_config model;
  optimizer_config optimizer;
  schedule_config schedule;
  double gradient_clipping = 1.0;
  bool bf16 = false;  ///< bf16 autocast
  bool fp16 = false;  ///< fp16 autocast (CUDA only; the job config refuses it on CPU)
  /// Loss scaling (the `fp16` block): set with fp16; also usable in fp32, where a scale above
  /// 2^127 overflows for real (the tests' way to reach the overflow path on a CPU).
  std::optional<loss_scale_config> loss_scaling;
  std::string device = "cpu";
  uint64_t seed = 42;
  int64_t rank = 0;     ///< for messages (dropout is keyed by sample, not by rank)
  int64_t threads = 1;  ///< intra-op threads, set on the thread that constructs the trainer
  /// Where the gradient buffer lives (zero-filled fp32, `numel` = gradient_buffer_elements(model)
  /// elements: the flat gradient and the word lookup's part), e.g. memory that ring neighbours on
  /// this host can read; empty: a new tensor.
  std::function<at::Tensor(int64_t numel)> gradient_buffer;
  /// Gradient buckets (compute/gradient_buckets.hpp): elements per bucket; ≤ 0: one bucket.
  int64_t reduce_bucket_elements = 0;
  /// Distillation: the loss is compute::distillation_loss against this frozen teacher; null:
  /// the masked-LM loss.
  std::shared_ptr<const teacher_setup> teacher;
  /// Fine-tuning: the task head on the encoder (compute/task_model.hpp), trained on batches with
  /// task labels; none: masked-LM pretraining.
  std::optional<task_head> task;
  /// Fine-tuning from a pretrained model: its parameters (CPU, HF names), whose encoder the task
  /// model starts from (the head from `seed`); null: everything from `seed`.
  std::shared_ptr<const named_tensors> pretrained;
  bool rescale_pretrained_embeddings = false;  ///< then task_model_impl::rescale_embeddings (task.rescale_embeddings)
  /// Fine-tuning: for the first this many optimizer steps the encoder's embeddings and layers are
  /// held (compute/held_parameters.hpp) and only the head learns (task.frozen_encoder_steps).
  int64_t frozen_encoder_steps = 0;
  /// DiLoCo (sync.mode "diloco"): the trainer also keeps the outer optimizer, whose momentum
  /// checkpoints hold as "outer_momentum"; none: window synchronisation.
  std::optional<diloco_config> diloco;
};

/// A distillation micro-batch's loss parts, each its share of the window's part (zero without a
/// teacher): the micro-batch's sum divided by the window's count of that part.
struct loss_parts {
  double ce = 0.0, mlm = 0.0, cos = 0.0, mse = 0.0;
};

/// What one micro-batch produced.
struct micro_step_result {
  /// The micro-batch's share of the window's loss: its cross-entropy summed over its masked
  /// tokens, divided by the window's masked tokens (plus the SOP and distillation terms, each
  /// divided by the window's count of its own items). The shares of a window add up, over its
  /// micro-batches and ranks, to the window's loss.
  double loss = 0.0;
  loss_parts parts;
  double teacher_seconds = 0.0;  ///< of forward_seconds, the teacher's forward
  /// ALBERT's sentence-order prediction (model.sentence_order_prediction): loss is then the
  /// masked-LM part (parts.mlm) plus this cross-entropy; correct counts the right guesses.
  bool sentence_order = false;
  double sentence_order_loss = 0.0;  ///< share of the window's SOP loss (its sum ÷ the window's samples)
  int64_t sentence_order_correct = 0;
  /// Fine-tuning: loss is the task's (its per-example sum ÷ the window's samples); correct
  /// counts the examples whose label (QA: start and end both) the logits' argmax got right.
  bool task = false;
  int64_t task_correct = 0;
  int64_t masked_tokens = 0;
  double forward_seconds = 0.0;
  double backward_seconds = 0.0;
};

/// What the optimizer step at a window's end did.
struct window_step_result {
  double grad_norm = 0.0;  ///< global norm of the averaged gradient, before clipping (NaN: skipped)
  double lr = 0.0;
  double loss_scale = 0.0;  ///< the scale this window's backward passes used (0: no loss scaling)
  bool skipped = false;     ///< the gradient overflowed: no optimizer step (the step still counts)
  double optimizer_seconds = 0.0;
};

/// Runs micro-batches (forward — of the student and a frozen teacher under distillation —,
/// backward, gradients accumulated in the flat buffer) and, at a window's end, clips the
/// gradient and steps the optimizer. Each micro-batch's backward pass is of its share of the
/// window's loss (micro_step_result::loss: sums divided by the window's counts, which the batch
/// carries), so the accumulated gradient, summed over the ranks, is the gradient of the window's
/// loss however the window is split (docs/architecture.md#contracts).
class mlm_trainer {
 public:
  explicit mlm_trainer(const trainer_options& options);
  ~mlm_trainer();

  /// Runs between a micro-batch's forward and backward pass with the forward's numbers (all but
  /// loss and backward_seconds) and its loss tensor (reading it on a GPU waits for the forward).
  using before_backward_hook = std::function<void(const micro_step_result& forward, const at::Tensor& loss)>;
  /// `before_backward`, when set: fault injection's "backward" phase, DiLoCo's statistics.
  micro_step_result micro_step(const mlm_batch& batch, const before_backward_hook& before_backward = {});
  /// Call once the flat gradient holds the sum of every micro-batch of the window (after any
  /// allreduce). Zeroes the gradient for the next window. Under loss scaling the step is
  /// skipped when the gradient holds an inf or NaN, or when `overflow_elsewhere` (another
  /// rank's gradient overflowed before the sum, as the window's statistics say).
  window_step_result finish_window(bool overflow_elsewhere = false);
  /// Under loss scaling: whether this rank's flat gradient (or, given, one bucket of it) holds
  /// an inf or NaN (one reduction on the device, one byte to the host); false without loss
  /// scaling.
  bool gradient_overflowed() const;
  bool gradient_overflowed(const gradient_bucket& bucket) const;
  /// The flat gradient's buckets, in the order the reducers sum them.
  const std::vector<gradient_bucket>& gradient_buckets() const { return watch_->plan(); }
  /// Announces to `ready`, during the next backward pass (on its thread), each bucket whose
  /// gradient is complete, in plan order; finish_gradient_watch() announces the rest once the
  /// backward pass returned (compute/gradient_buckets.hpp).
  void watch_gradients(gradient_watch::ready_callback ready) { watch_->arm(std::move(ready)); }
  void finish_gradient_watch() { watch_->finish(); }
  bool gradient_watched() const { return watch_->armed(); }
  /// The lookup part of the word embeddings' gradient (compute/word_lookup_gradient.hpp): over
  /// rings the worker sums its rows and folds it in after the buckets; alone, finish_window does.
  word_lookup_gradient& word_lookup() { return *lookup_; }
  /// The loss scaler's state (checkpoints); none without loss scaling.
  std::optional<loss_scale_state> loss_scale() const;
  /// The masked-LM NLL of `batch` under the current parameters, without dropout or gradients
  /// (the periodic held-out evaluation between windows).
  nll_sum evaluate(const mlm_batch& batch);
  /// Fine-tuning: the task loss and the examples the head got right on `batch` (with task
  /// labels), likewise without dropout or gradients.
  task_sum evaluate_task(const mlm_batch& batch);

  /// The flat gradient buffer (what a reducer allreduces).
  const at::Tensor& gradients() const;
  /// The flat parameter buffer (hashed to check that replicas agree).
  const at::Tensor& parameter_values() const;
  /// For synchronising after every micro-batch: adds the (already reduced) gradient into a
  /// separate accumulator and zeroes it, so the next micro-batch's reduce sees only its own
  /// gradient; restore_banked_gradient() moves the accumulated sum back before finish_window.
  void bank_gradient();
  void restore_banked_gradient();
  /// Forgets a window that will not be stepped (its allreduce was abandoned when a node was
  /// lost): the gradient and any banked gradient are zeroed; parameters and optimizer state
  /// stay as the last finished window left them.
  void discard_window();
  /// The flat buffers that are a replica's state: parameters, then the optimizer's moments
  /// (allocated now when no step has run), then DiLoCo's round start and outer momentum. Copying them and the step count from another
  /// replica makes this one equal to it (how a node joining a running job gets its state).
  std::vector<at::Tensor> state_buffers();
  /// Windows stepped, skipped ones included (the job's step); the optimizer's own count (its
  /// bias correction) and the learning-rate schedule advance only with applied steps.
  void set_optimizer_steps(int64_t steps);
  int64_t optimizer_steps() const;
  /// DiLoCo: the outer optimizer's fragments (1 unless streaming), and fragment f's range of the
  /// flat buffers.
  int64_t fragments() const;
  fragment_range fragment(int64_t f) const;
  /// DiLoCo: the carrier (the flat gradient buffer, zero after finish_window) takes this
  /// replica's pseudo-gradient on fragment f times `weight` (compute/outer_optimizer.hpp), to be
  /// summed over the replicas; outer_step then divides the sum by the replicas' total weight,
  /// steps the outer optimizer there and sets the fragment's parameters to the result.
  /// `out`, `summed`: the fragment's carrier when it is not the gradient buffer's own range (an
  /// exchange overlapped with the next inner steps, sync.overlap_steps).
  void put_pseudo_gradient(int64_t fragment, double weight, const at::Tensor& out = {});
  void outer_step(int64_t fragment, double total_weight, const at::Tensor& summed = {});
  /// DiLoCo: this replica's weight and every replica's in each fragment's current round
  /// (compute/outer_optimizer.hpp).
  void add_round_weights(double own, double total);
  double round_weight(int64_t fragment) const;
  double round_total(int64_t fragment) const;
  /// After a replica copied another's state: every round starts from the copied round start.
  void clear_round_weights();
  /// What is this replica's own and goes into a checkpoint per rank: the inner optimizer's
  /// state tensors (allocated now when no step has run), and with several DiLoCo fragments the
  /// replica's parameters and round weights (compute/outer_optimizer.hpp). A checkpoint of
  /// several DiLoCo ranks holds rank r's (r > 0) in its part (io/checkpoint/rank_parts.hpp), read
  /// back as "rank<r>/<name>", and load() gives every rank its own back.
  named_tensors own_state_buffers();
  /// The parameters every replica agrees on: DiLoCo's round start, else the parameters.
  const at::Tensor& agreed_parameter_values() const;
  /// Runs `body` with the model's parameters set to agreed_parameter_values(), then puts this
  /// replica's own back (a copy each way under DiLoCo, where they differ between outer steps).
  void with_agreed_parameters(const std::function<void()>& body);
  /// Streaming DiLoCo resumed on another world size: the ranks' own parameters and round weights
  /// and the round totals in the checkpoint belong to another set of replicas, so every round
  /// starts again from the round start.
  void restart_rounds_from_start();
  /// Parameters under their HuggingFace names (views; copy before handing to another thread).
  named_tensors named_parameters() const;
  /// The same names over agreed_parameter_values(): what a checkpoint's model holds (under
  /// DiLoCo the round start, which with one fragment is the parameters at every checkpoint).
  named_tensors named_agreed_parameters() const;
  named_tensors optimizer_state() const;
  /// The optimizer moments, allocated now if no step has run yet. With named_parameters(): where
  /// a checkpoint can be read in place; load() given these same tensors copies nothing.
  named_tensors optimizer_buffers();
  /// Restores parameters (by HF name) and, when `optimizer_state` is not empty, the moments
  /// (this rank's "rank<r>/" entries when the checkpoint has them, else the unprefixed ones);
  /// `loss_scale`, when given and this trainer scales, the scaler (before the step count, which
  /// counts its skipped steps).
  void load(const named_tensors& parameters, const named_tensors& optimizer_state, int64_t optimizer_steps,
            const std::optional<loss_scale_state>& loss_scale = std::nullopt);
  c10::Device device() const { return device_; }
  /// The seed dropout masks are keyed with (with each sample and site; recorded in checkpoints).
  uint64_t dropout_seed() const;

 private:
  trainer_options options_;
  c10::Device device_;
  std::shared_ptr<masked_lm_impl> model_;  ///< under fine-tuning, the task model's encoder
  std::shared_ptr<task_model_impl> task_;  ///< fine-tuning's; null in pretraining
  std::shared_ptr<masked_lm_impl> teacher_;  ///< distillation's, frozen; null without
  std::unique_ptr<flat_parameters> parameters_;
  std::unique_ptr<optimizer> optimizer_;
  std::unique_ptr<outer_optimizer> outer_;  ///< DiLoCo's; null in window synchronisation
  std::unique_ptr<loss_scaler> scaler_;  ///< null without loss scaling
  std::unique_ptr<held_parameters> held_encoder_;  ///< null unless frozen_encoder_steps
  std::unique_ptr<gradient_watch> watch_;
  std::unique_ptr<word_lookup_gradient> lookup_;
  at::Tensor banked_gradient_;

  void build_models(const trainer_options& options);
  void build_gradient_buffers(const trainer_options& options);
  /// The loss of a fine-tuning micro-batch (on the device) as its share of the window's.
  at::Tensor task_loss(const mlm_batch& batch, micro_step_result& result);
  int64_t skipped_steps() const;
  /// `state` followed by DiLoCo's outer state (none in window synchronisation).
  named_tensors with_outer_state(named_tensors state) const;
  at::Tensor fragment_carrier(int64_t fragment, const at::Tensor& carrier) const;
  c10::ScalarType autocast_dtype() const;
  /// Drops the model's bf16 weight copies (compute/cpu_bf16_linear.hpp): wherever the parameters
  /// may be written (the optimizer, outer steps, loads, replica copies, DiLoCo's round starts),
  /// since writes through the flat buffer do not move the parameters' version counters.
  void forget_weight_copies();
};

}  // namespace troupe::compute
