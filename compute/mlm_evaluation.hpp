#pragma once
/// Evaluation of a masked-LM: perplexity, pseudo-perplexity and the unigram baseline.

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "compute/bert_config.hpp"
#include "compute/mlm_batch.hpp"
#include "compute/named_tensors.hpp"
#include "compute/word_accuracy.hpp"

namespace troupe::compute {

struct masked_lm_impl;

/// A running sum of negative log-likelihoods (natural log) over predicted tokens.
struct nll_sum {
  double total = 0.0;
  int64_t tokens = 0;
  void add(const nll_sum& other) {
    total += other.total;
    tokens += other.tokens;
  }
  double mean() const { return tokens > 0 ? total / static_cast<double>(tokens) : 0.0; }
  double perplexity() const { return std::exp(mean()); }
};

/// Fine-tuning's held-out sums: HF's per-example task loss summed, the examples the head got
/// right (question answering: start and end both) and how many were scored.
struct task_sum {
  double loss = 0.0;
  int64_t correct = 0;
  int64_t examples = 0;
  void add(const task_sum& other) {
    loss += other.loss;
    correct += other.correct;
    examples += other.examples;
  }
};

/// A predicted token and its probability.
struct token_guess {
  int64_t id = 0;
  double probability = 0.0;
};

/// A model in evaluation mode (no dropout, no gradients).
class mlm_evaluator {
 public:
  mlm_evaluator(const bert_config& config, const named_tensors& parameters, c10::Device device, bool bf16);
  ~mlm_evaluator();

  /// NLL of the labels at the batch's masked positions. With `sentence_order_correct`, adds the
  /// sentence-order guesses that match the batch's labels (ALBERT with `prepare --task sop`
  /// data; nothing when the model has no such head or the batch no labels), from the same forward.
  /// With `ranks`, also appends how well the model guessed each masked piece (its top 1 and top 5),
  /// in the order of the batch's masked positions.
  nll_sum masked_lm(const mlm_batch& batch, int64_t* sentence_order_correct = nullptr,
                    std::vector<guess_rank>* ranks = nullptr);

  /// Pseudo-log-likelihood (Salazar et al. 2020, "Masked Language Model Scoring"): every
  /// maskable position t of the sequence is replaced by [MASK] in its own copy, and the NLL of
  /// the original token at t is summed; copies run `batch_size` at a time.
  /// `tokens` is [seq] int64 (one sequence), `length` its unpadded length.
  nll_sum pseudo_log_likelihood(const at::Tensor& tokens, const at::Tensor& token_types, int64_t length,
                                int64_t mask_id, const std::vector<int64_t>& special_ids, int64_t batch_size);

  /// HF's fill-mask: the `top_k` most probable tokens (softmax over the vocabulary) at each of
  /// `positions` of the one sequence `tokens` (unpadded), best first. Token type 1 from
  /// `type_boundary` on (a second segment; by default none).
  std::vector<std::vector<token_guess>> top_tokens(const std::vector<int64_t>& tokens, const std::vector<int64_t>& positions,
                                                   int64_t top_k, std::size_t type_boundary = SIZE_MAX);

 private:
  std::shared_ptr<masked_lm_impl> model_;
  c10::Device device_;
  bool bf16_;
};

/// NLL of `labels` under an add-one-smoothed unigram model with `counts` per vocabulary id.
nll_sum unigram_nll(const std::vector<uint64_t>& counts, const at::Tensor& labels);

/// The `count` most frequent ids of `counts` that are `eligible`, most frequent first, ties to the
/// lower id.
std::vector<int64_t> most_frequent_ids(const std::vector<uint64_t>& counts, std::size_t count,
                                       const std::function<bool(int64_t)>& eligible);

/// The unigram baseline's guesses: the five most frequent ids of `counts` (most frequent first,
/// ties to the lower id), leaving out `excluded` (special tokens, which are never masked).
std::vector<int64_t> unigram_top5(const std::vector<uint64_t>& counts, const std::vector<int64_t>& excluded);

}  // namespace troupe::compute
