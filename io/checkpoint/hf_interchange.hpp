#pragma once
/// HuggingFace format in and out: `troupe ckpt export` and `troupe ckpt import`.

#include <filesystem>
#include <string>

namespace troupe::io {

/// Writes HF_DIR with config.json (BertConfig), model.safetensors (BertForMaskedLM names; the
/// decoder weight is tied and omitted, as transformers saves it; a fine-tuned model's are its
/// task class's, e.g. BertForSequenceClassification with id2label, io/checkpoint/hf_task_config.hpp)
/// and the tokenizer of the
/// checkpoint's data: vocab.txt for BertTokenizer (WordPiece data) or spiece.model for
/// AlbertTokenizer (SentencePiece data), with tokenizer_config.json, so
/// `BertForMaskedLM.from_pretrained(HF_DIR)` and `AutoTokenizer` load it. `vocab` (a WordPiece
/// vocab.txt) overrides the data's tokenizer. Refuses an existing `hf_dir` unless `overwrite`.
void export_hf(const std::filesystem::path& checkpoint, const std::filesystem::path& hf_dir,
               const std::filesystem::path& vocab, bool overwrite);

/// Builds a troupe checkpoint (step 0, no optimizer state) from an HF BERT directory
/// (config.json + model.safetensors; "bert."-less BertModel names are accepted, the pooler and
/// NSP head are dropped, a missing MLM head is freshly initialised; a task model, one whose
/// config.json's architectures names a ForQuestionAnswering or ForSequenceClassification class,
/// keeps exactly its task class's tensors). Every tensor is checked
/// against the config's shapes. `vocab` (default HF_DIR/vocab.txt) sets the vocabulary identity.
void import_hf(const std::filesystem::path& hf_dir, const std::filesystem::path& checkpoint,
               const std::filesystem::path& vocab, bool overwrite);

}  // namespace troupe::io
