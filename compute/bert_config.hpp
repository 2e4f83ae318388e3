#pragma once
/// Sizes of a BERT-family encoder, with HuggingFace BertConfig's names (a DistilBertConfig's
/// dim, n_layers, n_heads, hidden_dim map onto them: io/checkpoint/hf_model_config.cpp).

#include <cstdint>
#include <string>

namespace troupe::compute {

struct bert_config {
  std::string model_type = "bert";  ///< "bert", "distilbert" or "albert" (compute/masked_lm.hpp)
  int64_t vocab_size = 30522;
  int64_t hidden_size = 256;
  int64_t num_hidden_layers = 4;
  int64_t num_attention_heads = 4;
  int64_t intermediate_size = 1024;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  double layer_norm_eps = 1e-12;
  double initializer_range = 0.02;
  std::string hidden_act = "gelu";  ///< "gelu" (exact) or "gelu_new" (tanh approximation, ALBERT's)
  // ALBERT only (HF AlbertConfig's names):
  int64_t embedding_size = 128;       ///< E of the factorised embeddings (V×E, then E→H)
  int64_t num_hidden_groups = 1;      ///< groups of layers whose parameters are shared
  int64_t inner_group_num = 1;        ///< layers in each group
  double classifier_dropout_prob = 0.1;  ///< before the sentence-order classifier
  bool sentence_order_prediction = false;  ///< train the SOP head (needs `prepare --task sop` data)
};

/// Parameters of the model_type's MLM with these sizes, in closed form (for bounding staging memory before
/// any tensor exists; tests/compute/bert_model_test.cpp checks it against a built model).
int64_t parameter_count(const bert_config& config);
/// Elements of a trainer's gradient buffer: the flat gradient of every parameter, then the word
/// lookup's part of the word embeddings' gradient and its row flags (compute/word_lookup_gradient.hpp).
int64_t gradient_buffer_elements(const bert_config& config);

}  // namespace troupe::compute
