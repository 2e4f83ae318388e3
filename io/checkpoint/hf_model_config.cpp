#include "io/checkpoint/hf_model_config.hpp"

#include "io/config/json_fields.hpp"

namespace troupe::io {

using nlohmann::json;

namespace {

json hf_distilbert_config(const compute::bert_config& model) {
  return {{"architectures", {"DistilBertForMaskedLM"}},
          {"model_type", "distilbert"},
          {"vocab_size", model.vocab_size},
          {"dim", model.hidden_size},
          {"n_layers", model.num_hidden_layers},
          {"n_heads", model.num_attention_heads},
          {"hidden_dim", model.intermediate_size},
          {"max_position_embeddings", model.max_position_embeddings},
          {"sinusoidal_pos_embds", false},
          {"dropout", model.hidden_dropout_prob},
          {"attention_dropout", model.attention_probs_dropout_prob},
          {"activation", "gelu"},
          {"initializer_range", model.initializer_range},
          {"qa_dropout", 0.1},
          {"seq_classif_dropout", 0.2},
          {"tie_weights_", true},
          {"pad_token_id", 0}};
}

// DistilBertConfig has no layer_norm_eps: HF's DistilBERT fixes it at 1e-12.
compute::bert_config distilbert_config_from_hf(json_fields& fields) {
  compute::bert_config model;
  model.model_type = "distilbert";
  model.vocab_size = fields.integer("vocab_size", 0, 1, 1 << 24);
  model.hidden_size = fields.integer("dim", 768, 1, 1 << 16);
  model.num_hidden_layers = fields.integer("n_layers", 6, 1, 1024);
  model.num_attention_heads = fields.integer("n_heads", 12, 1, 1024);
  model.intermediate_size = fields.integer("hidden_dim", 4 * model.hidden_size, 1, 1 << 18);
  model.max_position_embeddings = fields.integer("max_position_embeddings", 512, 1, 1 << 16);
  model.hidden_dropout_prob = fields.number("dropout", 0.1, 0, 1);
  model.attention_probs_dropout_prob = fields.number("attention_dropout", 0.1, 0, 1);
  model.initializer_range = fields.number("initializer_range", 0.02, 0, 1);
  model.layer_norm_eps = 1e-12;
  if (fields.has("sinusoidal_pos_embds") && fields.boolean("sinusoidal_pos_embds", false))
    fields.fail("sinusoidal_pos_embds", "false (troupe's DistilBERT learns its position embeddings)");
  if (fields.has("activation") && fields.string("activation", "gelu") != "gelu")
    fields.fail("activation", "\"gelu\" (the only activation troupe implements)");
  if (model.hidden_size % model.num_attention_heads != 0) fields.fail("dim", "a multiple of n_heads");
  return model;
}

json hf_albert_config(const compute::bert_config& model) {
  return {{"architectures", {"AlbertForPreTraining"}},
          {"model_type", "albert"},
          {"vocab_size", model.vocab_size},
          {"embedding_size", model.embedding_size},
          {"hidden_size", model.hidden_size},
          {"num_hidden_layers", model.num_hidden_layers},
          {"num_hidden_groups", model.num_hidden_groups},
          {"num_attention_heads", model.num_attention_heads},
          {"intermediate_size", model.intermediate_size},
          {"inner_group_num", model.inner_group_num},
          {"hidden_act", model.hidden_act},
          {"hidden_dropout_prob", model.hidden_dropout_prob},
          {"attention_probs_dropout_prob", model.attention_probs_dropout_prob},
          {"max_position_embeddings", model.max_position_embeddings},
          {"type_vocab_size", model.type_vocab_size},
          {"initializer_range", model.initializer_range},
          {"layer_norm_eps", model.layer_norm_eps},
          {"classifier_dropout_prob", model.classifier_dropout_prob},
          {"position_embedding_type", "absolute"},
          {"pad_token_id", 0},
          {"bos_token_id", 2},
          {"eos_token_id", 3}};
}

compute::bert_config bert_config_from_hf(json_fields& fields) {
  compute::bert_config model;
  model.vocab_size = fields.integer("vocab_size", 0, 1, 1 << 24);
  model.hidden_size = fields.integer("hidden_size", 0, 1, 1 << 16);
  model.num_hidden_layers = fields.integer("num_hidden_layers", 0, 1, 1024);
  model.num_attention_heads = fields.integer("num_attention_heads", 0, 1, 1024);
  model.intermediate_size = fields.integer("intermediate_size", 0, 1, 1 << 18);
  model.max_position_embeddings = fields.integer("max_position_embeddings", 512, 1, 1 << 16);
  model.type_vocab_size = fields.integer("type_vocab_size", 2, 1, 16);
  model.hidden_dropout_prob = fields.number("hidden_dropout_prob", 0.1, 0, 1);
  model.attention_probs_dropout_prob = fields.number("attention_probs_dropout_prob", 0.1, 0, 1);
  model.layer_norm_eps = fields.number("layer_norm_eps", 1e-12, 0, 1);
  model.initializer_range = fields.number("initializer_range", 0.02, 0, 1);
  model.hidden_act = fields.choice("hidden_act", "gelu", {"gelu", "gelu_new"});
  if (model.hidden_size % model.num_attention_heads != 0)
    fields.fail("hidden_size", "a multiple of num_attention_heads");
  return model;
}

// AlbertConfig: BertConfig's names plus the factorised embeddings and the layer groups.
compute::bert_config albert_config_from_hf(json_fields& fields) {
  auto model = bert_config_from_hf(fields);
  model.model_type = "albert";
  model.embedding_size = fields.integer("embedding_size", 128, 1, 1 << 16);
  model.num_hidden_groups = fields.integer("num_hidden_groups", 1, 1, model.num_hidden_layers);
  model.inner_group_num = fields.integer("inner_group_num", 1, 1, 64);
  model.classifier_dropout_prob = fields.number("classifier_dropout_prob", 0.1, 0, 1);
  return model;
}

}  // namespace

json hf_model_config(const compute::bert_config& model) {
  if (model.model_type == "distilbert") return hf_distilbert_config(model);
  if (model.model_type == "albert") return hf_albert_config(model);
  return {{"architectures", {"BertForMaskedLM"}},
          {"model_type", "bert"},
          {"vocab_size", model.vocab_size},
          {"hidden_size", model.hidden_size},
          {"num_hidden_layers", model.num_hidden_layers},
          {"num_attention_heads", model.num_attention_heads},
          {"intermediate_size", model.intermediate_size},
          {"max_position_embeddings", model.max_position_embeddings},
          {"type_vocab_size", model.type_vocab_size},
          {"hidden_dropout_prob", model.hidden_dropout_prob},
          {"attention_probs_dropout_prob", model.attention_probs_dropout_prob},
          {"layer_norm_eps", model.layer_norm_eps},
          {"initializer_range", model.initializer_range},
          {"hidden_act", model.hidden_act},
          {"pad_token_id", 0},
          {"position_embedding_type", "absolute"}};
}

compute::bert_config model_config_from_hf(const json& config, const std::string& source) {
  json_fields fields(config, source);
  const auto type =
      fields.has("model_type") ? fields.choice("model_type", "bert", {"bert", "distilbert", "albert"}) : "bert";
  // other HF keys (architectures, torch_dtype, ...) are allowed and ignored
  if (type == "distilbert") return distilbert_config_from_hf(fields);
  return type == "albert" ? albert_config_from_hf(fields) : bert_config_from_hf(fields);
}

}  // namespace troupe::io
