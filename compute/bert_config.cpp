#include "compute/bert_config.hpp"

namespace troupe::compute {

int64_t gradient_buffer_elements(const bert_config& c) {
  const int64_t width = c.model_type == "albert" ? c.embedding_size : c.hidden_size;
  return parameter_count(c) + c.vocab_size * width + c.vocab_size;  // word_lookup_gradient::buffer_elements
}

int64_t parameter_count(const bert_config& c) {
  const int64_t h = c.hidden_size, i = c.intermediate_size;
  if (c.model_type == "albert") {
    const int64_t e = c.embedding_size;
    const int64_t embeddings = (c.vocab_size + c.max_position_embeddings + c.type_vocab_size) * e + 2 * e;
    const int64_t mapping = e * h + h;
    const int64_t layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h;
    const int64_t pooler = h * h + h, head = c.vocab_size + 2 * e + (h * e + e), sentence_order = 2 * h + 2;
    return embeddings + mapping + c.num_hidden_groups * c.inner_group_num * layer + pooler + head + sentence_order;
  }
  const int64_t token_types = c.model_type == "distilbert" ? 0 : c.type_vocab_size;
  const int64_t embeddings = (c.vocab_size + c.max_position_embeddings + token_types) * h + 2 * h;
  const int64_t layer = 4 * (h * h + h) + 2 * 2 * h + (h * i + i) + (i * h + h);
  const int64_t head = (h * h + h) + 2 * h + c.vocab_size;
  return embeddings + c.num_hidden_layers * layer + head;
}

}  // namespace troupe::compute
