// The trainer's side of DiLoCo's outer rounds (sync.mode "diloco"; docs/configuration.md#sync):
// the fragments the outer optimizer synchronises, the pseudo-gradient each replica puts into the
// exchange, the outer step that applies the replicas' sum, the samples each replica weighed in
// with, and the agreed parameters (the round start) that checkpoints and evaluation read. Under
// window synchronisation there is no outer optimizer, and each answers as for one fragment that
// is the whole model, agreed at every step.
#include "compute/mlm_trainer.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "compute/flat_parameters.hpp"
#include "compute/outer_optimizer.hpp"
#include "messages/error.hpp"

namespace troupe::compute {

int64_t mlm_trainer::fragments() const { return outer_ ? outer_->fragments() : 1; }

fragment_range mlm_trainer::fragment(int64_t f) const {
  return outer_ ? outer_->range(f) : fragment_range{0, parameters_->values().numel()};
}

/// `carrier` when given, else fragment f's range of the gradient buffer.
at::Tensor mlm_trainer::fragment_carrier(int64_t fragment, const at::Tensor& carrier) const {
  if (carrier.defined()) return carrier;
  const auto r = outer_->range(fragment);
  return gradients().narrow(0, r.begin, r.size());
}

void mlm_trainer::put_pseudo_gradient(int64_t fragment, double weight, const at::Tensor& out) {
  TROUPE_ENFORCE(outer_, "put_pseudo_gradient without sync.mode \"diloco\"");
  outer_->put_pseudo_gradient(parameters_->values(), fragment_carrier(fragment, out), fragment, weight);
}

void mlm_trainer::outer_step(int64_t fragment, double total_weight, const at::Tensor& summed) {
  TROUPE_ENFORCE(outer_, "outer_step without sync.mode \"diloco\"");
  forget_weight_copies();
  outer_->step(parameters_->values(), fragment_carrier(fragment, summed), fragment, total_weight);
}

void mlm_trainer::add_round_weights(double own, double total) {
  TROUPE_ENFORCE(outer_, "add_round_weights without sync.mode \"diloco\"");
  outer_->add_round_weights(own, total);
}

double mlm_trainer::round_weight(int64_t fragment) const { return outer_ ? outer_->round_weight(fragment) : 0.0; }
double mlm_trainer::round_total(int64_t fragment) const { return outer_ ? outer_->round_total(fragment) : 0.0; }

void mlm_trainer::clear_round_weights() { if (outer_) outer_->clear_round_weights(); }

const at::Tensor& mlm_trainer::agreed_parameter_values() const {
  return outer_ ? outer_->round_start() : parameters_->values();
}

void mlm_trainer::with_agreed_parameters(const std::function<void()>& body) {
  if (!outer_) return body();
  torch::NoGradGuard no_grad;
  forget_weight_copies();
  const auto own = parameters_->values().clone();
  parameters_->values().copy_(outer_->round_start());
  try {
    body();
  } catch (...) {
    parameters_->values().copy_(own);
    throw;
  }
  parameters_->values().copy_(own);
}

void mlm_trainer::restart_rounds_from_start() {
  if (!outer_) return;
  torch::NoGradGuard no_grad;
  forget_weight_copies();
  parameters_->values().copy_(outer_->round_start());
  outer_->clear_round_weights();
}

named_tensors mlm_trainer::named_agreed_parameters() const {
  if (!outer_) return named_parameters();
  named_tensors named;
  for (const auto& slot : parameters_->slots())
    named.emplace_back(slot.name, outer_->round_start().narrow(0, slot.offset, slot.numel).view(slot.shape));
  return named;
}

}  // namespace troupe::compute
