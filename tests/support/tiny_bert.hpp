#pragma once
/// The smallest BERT the trainer tests drive directly (2 layers, hidden 32, vocabulary 200).

#include "compute/bert_config.hpp"

namespace troupe::testing {

inline compute::bert_config tiny_bert(double dropout = 0.1) {
  compute::bert_config model;
  model.vocab_size = 200;
  model.hidden_size = 32;
  model.num_hidden_layers = 2;
  model.num_attention_heads = 2;
  model.intermediate_size = 64;
  model.max_position_embeddings = 32;
  model.hidden_dropout_prob = dropout;
  model.attention_probs_dropout_prob = dropout;
  return model;
}

}  // namespace troupe::testing
