#include "compute/mlm_evaluation.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <algorithm>
#include <functional>

#include "compute/autocast_scope.hpp"
#include "compute/masked_lm.hpp"

namespace troupe::compute {

mlm_evaluator::mlm_evaluator(const bert_config& config, const named_tensors& parameters, c10::Device device,
                             bool bf16)
    : model_(make_masked_lm(config)), device_(device), bf16_(bf16) {
  assign_named_tensors(model_->hf_named_parameters(), parameters, "checkpoint model");
  model_->to(device_);
  model_->eval();
}

mlm_evaluator::~mlm_evaluator() = default;

nll_sum mlm_evaluator::masked_lm(const mlm_batch& batch, int64_t* sentence_order_correct,
                                 std::vector<guess_rank>* ranks) {
  torch::NoGradGuard no_grad;
  autocast_scope autocast(device_, bf16_);
  auto lengths = batch.lengths.defined() ? batch.lengths.to(device_) : batch.lengths;
  auto hidden = model_->encode(batch.input_ids.to(device_), batch.token_type_ids.to(device_), lengths);
  auto logits = model_->predict(hidden, batch.masked_positions.to(device_));
  const auto labels = batch.labels.to(device_);
  auto nll = at::cross_entropy_loss(logits, labels, {}, at::Reduction::Sum);
  if (ranks && labels.numel() > 0) {
    const auto guesses = std::get<1>(logits.topk(std::min<int64_t>(5, logits.size(-1)), -1));
    const auto right = guesses.eq(labels.unsqueeze(1)).to(at::kCPU);
    const auto first = right.select(1, 0).contiguous(), any = right.any(1).contiguous();
    for (int64_t i = 0; i < right.size(0); ++i)
      ranks->push_back(first[i].item<bool>() ? guess_rank::first : any[i].item<bool>() ? guess_rank::top5 : guess_rank::missed);
  }
  if (sentence_order_correct && batch.sentence_order_labels.defined()) {
    // From the same forward: the [CLS] state is already there.
    const auto order = model_->sentence_order_logits(hidden);
    if (order.defined())
      *sentence_order_correct += order.argmax(-1).eq(batch.sentence_order_labels.to(device_)).sum().item<int64_t>();
  }
  return {nll.item<double>(), batch.labels.numel()};
}

nll_sum mlm_evaluator::pseudo_log_likelihood(const at::Tensor& tokens, const at::Tensor& token_types, int64_t length,
                                             int64_t mask_id, const std::vector<int64_t>& special_ids,
                                             int64_t batch_size) {
  torch::NoGradGuard no_grad;
  autocast_scope autocast(device_, bf16_);
  auto ids = tokens.accessor<int64_t, 1>();
  std::vector<int64_t> positions;
  for (int64_t p = 0; p < length; ++p)
    if (std::find(special_ids.begin(), special_ids.end(), ids[p]) == special_ids.end()) positions.push_back(p);
  nll_sum sum;
  const int64_t seq = tokens.size(0);
  for (std::size_t start = 0; start < positions.size(); start += static_cast<std::size_t>(batch_size)) {
    const auto count = static_cast<int64_t>(std::min<std::size_t>(batch_size, positions.size() - start));
    auto chunk = at::tensor(std::vector<int64_t>(positions.begin() + static_cast<std::ptrdiff_t>(start),
                                                 positions.begin() + static_cast<std::ptrdiff_t>(start) + count));
    auto copies = tokens.unsqueeze(0).repeat({count, 1});
    auto rows = at::arange(count, at::kLong);
    auto labels = copies.index({rows, chunk}).clone();
    copies.index_put_({rows, chunk}, mask_id);
    auto lengths = at::full({count}, length, at::kLong);
    auto hidden = model_->encode(copies.to(device_), token_types.unsqueeze(0).repeat({count, 1}).to(device_),
                                 length < seq ? lengths.to(device_) : at::Tensor());
    auto logits = model_->predict(hidden, (rows * seq + chunk).to(device_));
    sum.total += at::cross_entropy_loss(logits, labels.to(device_), {}, at::Reduction::Sum).item<double>();
    sum.tokens += count;
  }
  return sum;
}

nll_sum unigram_nll(const std::vector<uint64_t>& counts, const at::Tensor& labels) {
  double total_count = static_cast<double>(counts.size());
  for (auto c : counts) total_count += static_cast<double>(c);
  nll_sum sum;
  auto flat = labels.to(at::kCPU).to(at::kLong).contiguous();
  const int64_t* data = flat.data_ptr<int64_t>();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    double p = (static_cast<double>(counts.at(static_cast<std::size_t>(data[i]))) + 1.0) / total_count;
    sum.total -= std::log(p);
  }
  sum.tokens = flat.numel();
  return sum;
}

std::vector<int64_t> most_frequent_ids(const std::vector<uint64_t>& counts, std::size_t count,
                                       const std::function<bool(int64_t)>& eligible) {
  std::vector<int64_t> ids;
  for (int64_t id = 0; id < static_cast<int64_t>(counts.size()); ++id)
    if (eligible(id)) ids.push_back(id);
  const auto more_frequent = [&](int64_t a, int64_t b) {
    const auto ca = counts[static_cast<std::size_t>(a)], cb = counts[static_cast<std::size_t>(b)];
    return ca != cb ? ca > cb : a < b;
  };
  const auto kept = std::min(count, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kept), ids.end(), more_frequent);
  ids.resize(kept);
  return ids;
}

std::vector<int64_t> unigram_top5(const std::vector<uint64_t>& counts, const std::vector<int64_t>& excluded) {
  return most_frequent_ids(counts, 5, [&](int64_t id) {
    return std::find(excluded.begin(), excluded.end(), id) == excluded.end();
  });
}

std::vector<std::vector<token_guess>> mlm_evaluator::top_tokens(const std::vector<int64_t>& tokens,
                                                                const std::vector<int64_t>& positions, int64_t top_k,
                                                                std::size_t type_boundary) {
  torch::NoGradGuard no_grad;
  autocast_scope autocast(device_, bf16_);
  std::vector<int64_t> types(tokens.size(), 0);
  for (std::size_t p = type_boundary; p < types.size(); ++p) types[p] = 1;
  const auto ids = at::tensor(tokens, at::kLong).reshape({1, -1}).to(device_);
  const auto hidden = model_->encode(ids, at::tensor(types, at::kLong).reshape({1, -1}).to(device_), {});
  const auto logits = model_->predict(hidden, at::tensor(positions, at::kLong).to(device_));
  const auto [probabilities, best] = at::softmax(logits, -1).topk(std::min<int64_t>(top_k, logits.size(1)), -1);
  const auto p = probabilities.to(at::kCPU, at::kDouble), b = best.to(at::kCPU);
  std::vector<std::vector<token_guess>> guesses(positions.size());
  for (std::size_t i = 0; i < positions.size(); ++i)
    for (int64_t k = 0; k < p.size(1); ++k)
      guesses[i].push_back({b[static_cast<int64_t>(i)][k].item<int64_t>(), p[static_cast<int64_t>(i)][k].item<double>()});
  return guesses;
}

}  // namespace troupe::compute

