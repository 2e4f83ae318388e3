#pragma once
/// Fine-tuning models: the encoder of a BERT, DistilBERT or ALBERT masked-LM model with a task
/// head, tensor names and maths as HuggingFace's task models, so that a checkpoint exports to
/// (and imports from) transformers with no missing or unexpected keys:
///
///   question answering  (Bert|DistilBert|Albert)ForQuestionAnswering: qa_outputs (H → 2) on
///                       every position's final hidden state gives start and end logits;
///                       DistilBERT drops out the hidden states first (qa_dropout, 0.1)
///   classification      (Bert|DistilBert|Albert)ForSequenceClassification on the [CLS] state:
///                       BERT    bert.pooler.dense, tanh, dropout (classifier_dropout, default
///                               hidden_dropout_prob), classifier (H → num_labels)
///                       ALBERT  albert.pooler, tanh, dropout (classifier_dropout_prob),
///                               classifier
///                       DistilBERT  pre_classifier (H → H), ReLU, dropout (seq_classif_dropout,
///                               0.2), classifier
///
/// The encoder is built as the masked-LM model (compute/masked_lm.hpp) so a pretraining
/// checkpoint loads into it by name; its MLM head stays in memory unused and is not listed.
/// The losses are HF's: QA the mean of the start and end cross-entropies (positions outside the
/// sequence ignored), classification the cross-entropy (a regression head, num_labels 1, is
/// not offered).

#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compute/masked_lm.hpp"
#include "compute/named_tensors.hpp"
#include "compute/task_head.hpp"

namespace troupe::compute {

struct task_model_impl : torch::nn::Module {
  /// Throws troupe::error when num_labels < 2 for classification.
  task_model_impl(const bert_config& config, const task_head& head);

  /// Question answering: [batch, seq, 2] (start, end); classification: [batch, num_labels].
  /// fp32 either way. `lengths` marks padding as in masked_lm_impl::encode.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                        const torch::Tensor& lengths);
  /// Every trained tensor under its HF task-model name, in HF's state_dict order.
  named_tensors hf_named_parameters();
  /// The encoder's share of hf_named_parameters (without "pooler" for question answering).
  named_tensors encoder_parameters();
  /// encoder_parameters without the pooler: the embeddings and the layers, what
  /// task.frozen_encoder_steps holds (the pooler, untrained by masked-LM, learns with the head).
  named_tensors encoder_body_parameters();
  /// HF's initialisation of everything (reset_weights), then of the head alone from `seed`:
  /// normal(0, initializer_range) weights, zero biases.
  void reset_weights(uint64_t seed);
  /// Copies the encoder's tensors from a pretraining checkpoint's (HF names); throws
  /// troupe::error naming a missing or misshapen tensor. The head is left as it is, except
  /// ALBERT's pooler, which pretraining trains and classification reuses.
  void load_encoder(const named_tensors& pretrained);
  /// Multiplies the encoder's embedding tables (words, positions, token types) by one factor
  /// that brings the word embeddings' root mean square to initializer_range, a fresh table's.
  /// The embeddings' LayerNorm divides the factor out, so the model computes the same function;
  /// but AdamW moves every value by about the learning rate whatever its size, so pretrained
  /// tables grown several times larger than a fresh one's would move that many times more
  /// slowly, relative to their size, than a fresh model's (docs/experiments.md, polarity).
  /// Returns the factor.
  double rescale_embeddings();

  const bert_config& config() const { return encoder->config(); }
  const task_head& head() const { return head_; }

  std::shared_ptr<masked_lm_impl> encoder;
  torch::nn::Linear qa_outputs{nullptr};
  torch::nn::Linear pooler{nullptr};      ///< BERT's bert.pooler.dense (ALBERT's is the encoder's)
  torch::nn::Linear pre_classifier{nullptr};  ///< DistilBERT
  torch::nn::Linear classifier{nullptr};

 private:
  torch::Tensor classify(const torch::Tensor& hidden);
  named_tensors head_parameters();
  /// The head alone, as reset_weights does it.
  void reset_head(uint64_t seed);

  task_head head_;
  double dropout_ = 0;
};
TORCH_MODULE_IMPL(task_model, task_model_impl);

/// HF's QA loss: (CE(start_logits, start) + CE(end_logits, end)) / 2, positions clamped to
/// [0, seq] and seq ignored. `logits` [batch, seq, 2], positions [batch] int64.
torch::Tensor question_answering_loss(const torch::Tensor& logits, const torch::Tensor& start_positions,
                                      const torch::Tensor& end_positions);
/// HF's classification loss: the mean cross-entropy. `logits` [batch, labels], labels [batch] int64.
torch::Tensor classification_loss(const torch::Tensor& logits, const torch::Tensor& labels);

}  // namespace troupe::compute
