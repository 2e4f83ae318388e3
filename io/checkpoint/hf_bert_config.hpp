#pragma once
/// HuggingFace's BertConfig (config.json) for a troupe model, and back: what a checkpoint writes
/// beside model.safetensors and what `troupe ckpt import` reads.

#include <string>

#include <nlohmann/json.hpp>

#include "compute/bert_config.hpp"

namespace troupe::io {

/// HuggingFace BertConfig JSON for a model (BertForMaskedLM, gelu, absolute positions).
nlohmann::json hf_bert_config(const compute::bert_config& model);

/// Reads a BertConfig; `source` names the file in errors. Other HF keys are ignored.
compute::bert_config bert_config_from_hf(const nlohmann::json& config, const std::string& source);

}  // namespace troupe::io
