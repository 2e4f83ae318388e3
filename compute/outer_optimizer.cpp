#include "compute/outer_optimizer.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <algorithm>

#include "messages/error.hpp"

namespace troupe::compute {

namespace {

/// Round weights are sums of loss-term counts, whole numbers: each travels as two floats,
/// hi = float(w) and lo = float(w − hi), exact below 2⁴⁸ (checkpoints keep them in fp32 files).
at::Tensor encode_weights(const std::vector<double>& weights) {
  auto out = at::empty({static_cast<int64_t>(2 * weights.size())}, at::kFloat);
  auto* data = out.data_ptr<float>();
  for (std::size_t i = 0; i < weights.size(); ++i) {
    data[2 * i] = static_cast<float>(weights[i]);
    data[2 * i + 1] = static_cast<float>(weights[i] - static_cast<double>(data[2 * i]));
  }
  return out;
}

void decode_weights(const std::string& name, const at::Tensor& encoded, std::vector<double>& weights) {
  if (encoded.numel() != static_cast<int64_t>(2 * weights.size()))
    throw make_error("optimizer state: '", name, "' has ", encoded.numel(), " elements, ", weights.size(),
                     " fragments need ", 2 * weights.size());
  const auto values = encoded.to(at::kCPU, at::kFloat).contiguous();
  const auto* data = values.data_ptr<float>();
  for (std::size_t i = 0; i < weights.size(); ++i)
    weights[i] = static_cast<double>(data[2 * i]) + static_cast<double>(data[2 * i + 1]);
}

void copy_checked(const std::string& name, const at::Tensor& from, const at::Tensor& to) {
  if (from.numel() != to.numel())
    throw make_error("optimizer state: '", name, "' has ", from.numel(), " elements, the model needs ", to.numel());
  if (!shares_data(to, from)) to.copy_(from.reshape({-1}));
}

}  // namespace

outer_optimizer::outer_optimizer(const diloco_config& config, const at::Tensor& values)
    : config_(config),
      start_(values.detach().clone()),
      momentum_(at::zeros_like(values)),
      own_weights_(static_cast<std::size_t>(config.fragments), 0.0),
      total_weights_(static_cast<std::size_t>(config.fragments), 0.0) {}

fragment_range outer_optimizer::range(int64_t fragment) const {
  return fragment_of(start_.numel(), config_.fragments, fragment);
}

void outer_optimizer::put_pseudo_gradient(const at::Tensor& values, at::Tensor out, int64_t fragment,
                                          double weight) const {
  torch::NoGradGuard no_grad;
  const auto r = range(fragment);
  TROUPE_ENFORCE(out.numel() == r.size(), "a pseudo-gradient's carrier of another size than its fragment");
  at::sub_out(out, start_.narrow(0, r.begin, r.size()), values.narrow(0, r.begin, r.size())).mul_(weight);
}

void outer_optimizer::step(const at::Tensor& values, const at::Tensor& summed, int64_t fragment, double total_weight) {
  TROUPE_ENFORCE(total_weight > 0, "an outer step with no weight (no replica trained on anything this round)");
  torch::NoGradGuard no_grad;
  const auto r = range(fragment);
  TROUPE_ENFORCE(summed.numel() == r.size(), "a summed pseudo-gradient of another size than its fragment");
  auto slice = [&](const at::Tensor& t) { return t.narrow(0, r.begin, r.size()); };
  const auto delta = summed.div_(total_weight);
  auto momentum = slice(momentum_);
  auto start = slice(start_);
  momentum.mul_(config_.outer_momentum).add_(delta);
  if (config_.nesterov)
    start.sub_(delta.add(momentum, config_.outer_momentum), config_.outer_lr);
  else
    start.sub_(momentum, config_.outer_lr);
  const double alpha = config_.fragment_update_alpha;
  if (alpha > 0.0)
    slice(values).mul_(alpha).add_(start, 1.0 - alpha);
  else
    slice(values).copy_(start);
  delta.zero_();
  own_weights_[static_cast<std::size_t>(fragment)] = 0;
  total_weights_[static_cast<std::size_t>(fragment)] = 0;
}

void outer_optimizer::restart_round(const at::Tensor& values) {
  start_.copy_(values);
  clear_round_weights();
}

void outer_optimizer::add_round_weights(double own, double total) {
  for (auto& w : own_weights_) w += own;
  for (auto& w : total_weights_) w += total;
}

void outer_optimizer::clear_round_weights() {
  std::fill(own_weights_.begin(), own_weights_.end(), 0.0);
  std::fill(total_weights_.begin(), total_weights_.end(), 0.0);
}

named_tensors outer_optimizer::state() const {
  named_tensors state{{"outer_momentum", momentum_}};
  if (config_.replicas_keep_own_parameters()) state.emplace_back("outer_round_totals", encode_weights(total_weights_));
  return state;
}

named_tensors outer_optimizer::own_state(const at::Tensor& values) const {
  if (!config_.replicas_keep_own_parameters()) return {};
  return {{"local_parameters", values}, {"outer_round_weights", encode_weights(own_weights_)}};
}

bool outer_optimizer::load_state(const std::string& name, const at::Tensor& tensor, const at::Tensor& values) {
  if (name == "outer_momentum")
    copy_checked(name, tensor, momentum_);
  else if (name == "local_parameters" && config_.replicas_keep_own_parameters())
    copy_checked(name, tensor, values);
  else if (name == "outer_round_weights" && config_.replicas_keep_own_parameters())
    decode_weights(name, tensor, own_weights_);
  else if (name == "outer_round_totals" && config_.replicas_keep_own_parameters())
    decode_weights(name, tensor, total_weights_);
  else
    return false;
  return true;
}

}  // namespace troupe::compute
