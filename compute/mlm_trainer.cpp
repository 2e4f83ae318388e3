#include "compute/mlm_trainer.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <torch/utils.h>

#include <chrono>
#include <limits>

#include "compute/autocast_scope.hpp"
#include "compute/cpu_bf16_linear.hpp"
#include "compute/cuda_determinism.hpp"
#include "compute/masked_lm.hpp"
#include "compute/counter_random.hpp"
#include "compute/distillation_forward.hpp"
#include "compute/flat_parameters.hpp"
#include "compute/held_parameters.hpp"
#include "compute/intra_op_threads.hpp"
#include "compute/lr_schedule.hpp"
#include "compute/named_tensors.hpp"
#include "compute/optimizer.hpp"
#include "compute/outer_optimizer.hpp"
#include "compute/softmax_cross_entropy.hpp"
#include "compute/student_init.hpp"
#include "compute/task_model.hpp"
#include "compute/task_terms.hpp"
#include "compute/word_lookup_gradient.hpp"
#include "messages/error.hpp"

namespace troupe::compute {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

at::Tensor to_device(const at::Tensor& t, c10::Device device) {
  return t.defined() ? t.to(device, /*non_blocking=*/true) : t;
}

mlm_batch to_device(const mlm_batch& batch, c10::Device device) {
  mlm_batch moved = batch;
  moved.input_ids = to_device(batch.input_ids, device);
  moved.token_type_ids = to_device(batch.token_type_ids, device);
  moved.lengths = to_device(batch.lengths, device);
  moved.masked_positions = to_device(batch.masked_positions, device);
  moved.labels = to_device(batch.labels, device);
  moved.sentence_order_labels = to_device(batch.sentence_order_labels, device);
  moved.task_labels = to_device(batch.task_labels, device);
  return moved;
}

/// The frozen teacher on `device`, in eval mode, without gradients.
std::shared_ptr<masked_lm_impl> load_teacher(const teacher_setup& setup, c10::Device device) {
  auto teacher = make_masked_lm(setup.model);
  assign_named_tensors(teacher->hf_named_parameters(), setup.parameters, "distillation.teacher");
  for (auto& parameter : teacher->parameters()) parameter.set_requires_grad(false);
  teacher->to(device);
  teacher->eval();
  return teacher;
}

}  // namespace

mlm_trainer::mlm_trainer(const trainer_options& options)
    : options_(options), device_(options.device) {
  set_intra_op_threads(options.threads);  // LibTorch's and the BLAS library's pools: the bits follow the config
  if (device_.is_cuda()) use_deterministic_cuda_kernels(device_);  // reruns repeat every bit
  build_models(options);
  // Keyed by sample, not by rank: every replica draws a sample's masks alike (docs/architecture.md#contracts).
  model_->seed_dropout(keyed_random(options.seed, 0xd2));
  if (device_.is_cpu()) model_->keep_bf16_weight_copies();  // the window's bf16 weights (cpu_bf16_linear)
  build_gradient_buffers(options);
  optimizer_ = make_optimizer(options.optimizer);
  if (options.diloco) outer_ = std::make_unique<outer_optimizer>(*options.diloco, parameters_->values());
  if (options.loss_scaling) scaler_ = std::make_unique<loss_scaler>(*options.loss_scaling);
  if (task_ && options.frozen_encoder_steps > 0)
    held_encoder_ = std::make_unique<held_parameters>(*parameters_, task_->encoder_body_parameters());
}

/// The trained model (the masked-LM model, or a task model on its encoder) from the seed, a
/// pretrained encoder or a distillation teacher, on the device in training mode.
void mlm_trainer::build_models(const trainer_options& options) {
  if (options.task) {
    TROUPE_ENFORCE(!options.teacher, "a fine-tuning trainer has no distillation teacher");
    task_ = std::make_shared<task_model_impl>(options.model, *options.task);
    task_->reset_weights(options.seed);
    if (options.pretrained) {
      task_->load_encoder(*options.pretrained);
      if (options.rescale_pretrained_embeddings) task_->rescale_embeddings();
    }
    model_ = task_->encoder;
    task_->to(device_);
    task_->train();
    return;
  }
  model_ = make_masked_lm(options.model);
  model_->reset_weights(options.seed);
  if (options.teacher) {
    const auto& distillation = options.teacher->distillation;
    if (distillation.student_from_teacher) {
      auto layers = distillation.teacher_layers;
      if (layers.empty())
        layers = default_teacher_layers(options.teacher->model.num_hidden_layers, options.model.num_hidden_layers);
      init_student_from_teacher(model_->hf_named_parameters(), options.teacher->parameters, layers);
    }
    teacher_ = load_teacher(*options.teacher, device_);
  }
  model_->to(device_);
  model_->train();
}

mlm_trainer::~mlm_trainer() = default;

/// The flat parameters and gradient, the word lookup's part of the gradient behind it in the
/// same buffer, and the watch of the gradient buckets (the word embeddings' first).
void mlm_trainer::build_gradient_buffers(const trainer_options& options) {
  auto named = task_ ? task_->hf_named_parameters() : model_->hf_named_parameters();
  const auto words = std::find_if(named.begin(), named.end(), [](const auto& entry) {
    return name_ends_with(entry.first, "embeddings.word_embeddings.weight");
  });
  TROUPE_ENFORCE(words != named.end(), "the model has no word embeddings");
  const int64_t elements = gradient_buffer_elements(options.model, options.task);
  const auto buffer = options.gradient_buffer ? options.gradient_buffer(elements)
                                              : at::zeros({elements}, named.front().second.options());
  parameters_ = std::make_unique<flat_parameters>(named, [&](int64_t numel) { return buffer.narrow(0, 0, numel); });
  const int64_t flat = parameters_->gradients().numel();
  lookup_ = std::make_unique<word_lookup_gradient>(words->second, buffer.narrow(0, flat, elements - flat));
  model_->look_up_words_in(lookup_->lookup_weight());
  std::vector<at::Tensor> leaves;  // in slot order
  std::optional<std::size_t> words_slot;
  const auto& slots = parameters_->slots();
  for (std::size_t s = 0; s < slots.size(); ++s) {
    leaves.push_back(named[slots[s].declared].second);
    if (slots[s].name == words->first) words_slot = s;
  }
  watch_ = std::make_unique<gradient_watch>(plan_gradient_buckets(*parameters_, options.reduce_bucket_elements, words_slot),
                                            leaves);
}

micro_step_result mlm_trainer::micro_step(const mlm_batch& batch, const before_backward_hook& before_backward) {
  const int64_t masked = batch.labels.defined() ? batch.labels.numel() : 0;
  TROUPE_ENFORCE(batch.whole_window.samples >= batch.samples && batch.whole_window.masked_tokens >= masked,
                 "the micro-batch lacks its window's counts (window samples ", batch.whole_window.samples, ", masked ",
                 batch.whole_window.masked_tokens, "; the data loader sets them)");
  const auto share = [](const at::Tensor& sum, int64_t count) {
    return count > 0 ? sum / static_cast<double>(count) : sum * 0.0;
  };
  micro_step_result result;
  result.masked_tokens = masked;
  auto start = std::chrono::steady_clock::now();
  at::Tensor loss;
  {
    autocast_scope autocast(device_, autocast_dtype());
    model_->begin_dropout(batch.sample_keys);
    if (auto* copies = model_->weight_copies()) copies->begin_pass();
    const auto on_device = to_device(batch, device_);
    lookup_->mark_rows(on_device.input_ids);
    if (task_) {
      loss = task_loss(on_device, result);
    } else if (teacher_) {
      const auto distilled = distillation_forward(*model_, *teacher_, on_device, options_.teacher->distillation);
      loss = distilled.parts.total;
      result.teacher_seconds = distilled.teacher_seconds;
      result.parts = {distilled.parts.ce.item<double>(), distilled.parts.mlm.item<double>(),
                      distilled.parts.cos.item<double>(), distilled.parts.mse.item<double>()};
    } else {
      auto hidden = model_->encode(on_device.input_ids, on_device.token_type_ids, on_device.lengths);
      auto logits = model_->predict(hidden, on_device.masked_positions);
      loss = share(summed_cross_entropy(logits, on_device.labels), batch.whole_window.masked_tokens);
      if (options_.model.sentence_order_prediction && on_device.sentence_order_labels.defined()) {
        // AlbertForPreTraining's loss: masked-LM + sentence-order cross-entropy, each a mean over the window.
        const auto order_logits = model_->sentence_order_logits(hidden);
        const auto order_loss = share(at::cross_entropy_loss(order_logits, on_device.sentence_order_labels,
                                                             {}, at::Reduction::Sum),
                                      batch.whole_window.samples);
        result.sentence_order = true;
        result.parts.mlm = loss.item<double>();
        result.sentence_order_loss = order_loss.item<double>();
        result.sentence_order_correct =
            order_logits.argmax(-1).eq(on_device.sentence_order_labels).sum().item<int64_t>();
        loss = loss + order_loss;
      }
    }
  }
  result.forward_seconds = seconds_since(start);
  if (before_backward) before_backward(result, loss);
  start = std::chrono::steady_clock::now();
  // The loss is already this micro-batch's share of the window's (docs/architecture.md#contracts); under loss
  // scaling it is multiplied by the scale, divided out again in finish_window.
  const double scale = scaler_ ? scaler_->scale() : 1.0;
  (scaler_ ? loss * scale : loss).backward();
  result.loss = loss.item<double>();
  result.backward_seconds = seconds_since(start);
  return result;
}

at::Tensor mlm_trainer::task_loss(const mlm_batch& batch, micro_step_result& result) {
  TROUPE_ENFORCE(batch.task_labels.defined(), "a fine-tuning micro-batch without task labels");
  const auto logits = task_->forward(batch.input_ids, batch.token_type_ids, batch.lengths);
  const auto terms = task_terms_of(task_->head().type, logits, batch.task_labels);
  result.task = true;
  result.task_correct = terms.correct.sum().item<int64_t>();
  // HF's loss is the mean over examples: summed here, divided by the window's examples.
  return terms.loss_sum / static_cast<double>(batch.whole_window.samples);
}

task_sum mlm_trainer::evaluate_task(const mlm_batch& batch) {
  TROUPE_ENFORCE(task_, "the task evaluation of a masked-LM trainer");
  torch::NoGradGuard no_grad;
  task_->eval();
  task_sum sum;
  {
    autocast_scope autocast(device_, autocast_dtype());
    const auto on_device = to_device(batch, device_);
    const auto logits = task_->forward(on_device.input_ids, on_device.token_type_ids, on_device.lengths);
    const auto terms = task_terms_of(task_->head().type, logits, on_device.task_labels);
    sum = {terms.loss_sum.item<double>(), terms.correct.sum().item<int64_t>(), batch.task_labels.size(0)};
  }
  task_->train();
  return sum;
}

nll_sum mlm_trainer::evaluate(const mlm_batch& batch) {
  TROUPE_ENFORCE(!task_, "the masked-LM evaluation of a fine-tuning trainer");
  torch::NoGradGuard no_grad;
  model_->eval();
  nll_sum sum;
  {
    autocast_scope autocast(device_, autocast_dtype());
    const auto on_device = to_device(batch, device_);
    auto hidden = model_->encode(on_device.input_ids, on_device.token_type_ids, on_device.lengths);
    auto logits = model_->predict(hidden, on_device.masked_positions);
    auto nll = at::cross_entropy_loss(logits, on_device.labels, {}, at::Reduction::Sum);
    sum = {nll.item<double>(), batch.labels.numel()};
  }
  model_->train();
  return sum;
}

// Under loss scaling the window first asks the scaler (compute/loss_scaler.hpp): an overflow
// anywhere skips the step — the gradient is dropped, the optimizer and the schedule stay where
// they were, the job's step still advances. Otherwise the gradient is divided by the scale its
// backward passes used, then clipped, as without scaling.
window_step_result mlm_trainer::finish_window(bool overflow_elsewhere) {
  auto start = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  if (lookup_->pending()) lookup_->fold_rows();  // alone: no rings summed and folded it
  window_step_result result;
  double unscale = 1.0;
  if (scaler_) {
    result.loss_scale = scaler_->scale();
    const bool overflow = overflow_elsewhere || gradient_overflowed();
    if (!scaler_->update(overflow)) {
      result.skipped = true;
      result.grad_norm = std::numeric_limits<double>::quiet_NaN();
      result.lr = learning_rate(options_.schedule, options_.optimizer.lr, optimizer_->steps());
      discard_window();
      result.optimizer_seconds = seconds_since(start);
      return result;
    }
    unscale = result.loss_scale;
  }
  if (unscale != 1.0) parameters_->gradients().div_(unscale);
  result.grad_norm = clip_gradient_norm(parameters_->gradients(), options_.gradient_clipping);
  result.lr = learning_rate(options_.schedule, options_.optimizer.lr, optimizer_->steps());
  forget_weight_copies();
  const auto step = [&] { optimizer_->step(*parameters_, result.lr); };
  const bool hold = held_encoder_ && optimizer_steps() < options_.frozen_encoder_steps;
  hold ? held_encoder_->around(*parameters_, step) : step();
  parameters_->zero_gradients();
  result.optimizer_seconds = seconds_since(start);
  return result;
}

void mlm_trainer::discard_window() {
  torch::NoGradGuard no_grad;
  forget_weight_copies();
  parameters_->zero_gradients();
  lookup_->discard();
  if (banked_gradient_.defined()) banked_gradient_.zero_();
}

void mlm_trainer::forget_weight_copies() {
  if (auto* copies = model_->weight_copies()) copies->clear();  // no bf16 copy outlives a write
}

std::vector<at::Tensor> mlm_trainer::state_buffers() {
  forget_weight_copies();  // the caller writes them
  optimizer_->ensure_state(*parameters_);
  std::vector<at::Tensor> buffers{parameters_->values()};
  for (auto& [name, moment] : optimizer_->state()) buffers.push_back(moment);
  if (outer_) {  // the rounds restart after a copy: their weights are not copied
    buffers.push_back(outer_->round_start());
    for (auto& [name, tensor] : outer_->state())
      if (name == "outer_momentum") buffers.push_back(tensor);
  }
  return buffers;
}

named_tensors mlm_trainer::own_state_buffers() {
  optimizer_->ensure_state(*parameters_);
  auto state = optimizer_->state();
  if (outer_)
    for (auto& entry : outer_->own_state(parameters_->values())) state.push_back(entry);
  return state;
}

void mlm_trainer::set_optimizer_steps(int64_t steps) { optimizer_->set_steps(steps - skipped_steps()); }

uint64_t mlm_trainer::dropout_seed() const { return model_->dropout_state()->seed; }

const at::Tensor& mlm_trainer::gradients() const { return parameters_->gradients(); }
const at::Tensor& mlm_trainer::parameter_values() const { return parameters_->values(); }

void mlm_trainer::bank_gradient() {
  torch::NoGradGuard no_grad;
  TROUPE_ENFORCE(!lookup_->pending(), "bank_gradient before the word lookup's gradient was folded in");
  if (!banked_gradient_.defined()) banked_gradient_ = at::zeros_like(parameters_->gradients());
  banked_gradient_.add_(parameters_->gradients());
  parameters_->zero_gradients();
}

void mlm_trainer::restore_banked_gradient() {
  torch::NoGradGuard no_grad;
  TROUPE_ENFORCE(banked_gradient_.defined(), "restore_banked_gradient without bank_gradient");
  parameters_->gradients().copy_(banked_gradient_);
  banked_gradient_.zero_();
}

int64_t mlm_trainer::skipped_steps() const { return scaler_ ? scaler_->state().skipped_steps : 0; }

int64_t mlm_trainer::optimizer_steps() const { return optimizer_->steps() + skipped_steps(); }

namespace {

/// Whether `values` holds an inf or NaN: min and max propagate NaN and reach ±inf, so finite
/// extremes mean finite values.
bool holds_non_finite(const at::Tensor& values) {
  const auto [low, high] = at::aminmax(values);
  return !at::isfinite(at::stack({low, high})).all().item<bool>();
}

}  // namespace

bool mlm_trainer::gradient_overflowed() const {
  if (!scaler_) return false;
  torch::NoGradGuard no_grad;
  return holds_non_finite(parameters_->gradients());
}

bool mlm_trainer::gradient_overflowed(const gradient_bucket& bucket) const {
  if (!scaler_) return false;
  torch::NoGradGuard no_grad;
  for (const auto& piece : bucket.pieces)
    if (holds_non_finite(parameters_->gradients().narrow(0, piece.offset, piece.count))) return true;
  return false;
}

std::optional<loss_scale_state> mlm_trainer::loss_scale() const {
  return scaler_ ? std::optional<loss_scale_state>(scaler_->state()) : std::nullopt;
}

c10::ScalarType mlm_trainer::autocast_dtype() const {
  if (options_.fp16) return at::kHalf;
  return options_.bf16 ? at::kBFloat16 : at::kFloat;
}

named_tensors mlm_trainer::named_parameters() const {
  named_tensors named;
  for (const auto& slot : parameters_->slots()) named.emplace_back(slot.name, parameters_->value(slot));
  return named;
}

named_tensors mlm_trainer::with_outer_state(named_tensors state) const {
  if (outer_)
    for (auto& entry : outer_->state()) state.push_back(entry);
  return state;
}

named_tensors mlm_trainer::optimizer_state() const {
  auto state = with_outer_state(optimizer_->state());
  if (outer_)  // this rank's own (the writer's: rank 0's, unprefixed)
    for (auto& entry : outer_->own_state(parameters_->values())) state.push_back(entry);
  state.erase(std::remove_if(state.begin(), state.end(), [](const auto& e) { return !e.second.defined(); }),
              state.end());
  return state;
}

named_tensors mlm_trainer::optimizer_buffers() {
  optimizer_->ensure_state(*parameters_);
  return with_outer_state(optimizer_->state());
}

void mlm_trainer::load(const named_tensors& parameters, const named_tensors& state, int64_t optimizer_steps,
                       const std::optional<loss_scale_state>& loss_scale) {
  forget_weight_copies();
  assign_named_tensors(named_parameters(), parameters, "checkpoint model");
  if (scaler_ && loss_scale) scaler_->restore(*loss_scale);
  // DiLoCo: the model is the round start, on which every replica agrees. Each rank takes its own
  // entries (its inner state; with fragments its parameters and round weights) when the
  // checkpoint holds them for it ("rank<r>/…"), else the unprefixed ones, rank 0's.
  if (outer_) outer_->restart_round(parameters_->values());
  const std::string own_prefix = rank_state_name(options_.rank, "");
  named_tensors unprefixed, own;
  for (const auto& entry : state) {
    if (name_starts_with(entry.first, own_prefix))
      own.emplace_back(entry.first.substr(own_prefix.size()), entry.second);
    else if (!name_starts_with(entry.first, "rank") || entry.first.find('/') == std::string::npos)
      unprefixed.push_back(entry);  // else another rank's
  }
  const auto every_replicas = [](const std::string& name) { return name == "outer_momentum" || name == "outer_round_totals"; };
  for (const auto& [name, tensor] : unprefixed) {
    if (!every_replicas(name)) continue;
    if (!outer_) throw make_error("optimizer state: '", name, "' is DiLoCo's (sync.mode \"diloco\"); this job synchronises windows");
    outer_->load_state(name, tensor, parameters_->values());
  }
  named_tensors inner;
  for (const auto& entry : own.empty() ? unprefixed : own) {
    if (every_replicas(entry.first)) continue;
    if (outer_ && outer_->load_state(entry.first, entry.second, parameters_->values())) continue;
    inner.push_back(entry);
  }
  if (!inner.empty()) optimizer_->load_state(*parameters_, inner, optimizer_steps - skipped_steps());
}

}  // namespace troupe::compute
