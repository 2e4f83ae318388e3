#pragma once
/// HuggingFace's config.json for a troupe model (BertConfig, DistilBertConfig or AlbertConfig, by
/// model_type), and back: what a checkpoint writes beside model.safetensors and what
/// `troupe ckpt import` and checkpoint loading read.

#include <string>

#include <nlohmann/json.hpp>

#include "compute/bert_config.hpp"

namespace troupe::io {

/// The HF config JSON for a model: BertForMaskedLM (gelu, absolute positions) or
/// DistilBertForMaskedLM (dim, n_layers, n_heads, hidden_dim; learned positions).
nlohmann::json hf_model_config(const compute::bert_config& model);

/// Reads a BertConfig or DistilBertConfig (its model_type; absent means "bert"); `source`
/// names the file in errors. Other HF keys are ignored.
compute::bert_config model_config_from_hf(const nlohmann::json& config, const std::string& source);

}  // namespace troupe::io
