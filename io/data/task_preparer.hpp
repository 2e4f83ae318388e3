#pragma once
/// `troupe prepare --task squad|classify`: a fine-tuning task's files → a data directory whose
/// sequences are the model's inputs with their labels (token shards with task labels,
/// io/data/token_shards.hpp), as run_squad.py and run_glue.py cache their features:
///
///   squad      each question's windows (io/data/squad_features.hpp) with its answer's start
///              and end positions; the training file's questions whose answer text is not in
///              the context are skipped and counted, as run_squad.py skips them
///   classify   [CLS] text [SEP] (pair [SEP]) (io/data/sentence_pair_encoding.hpp) with the class
///              index; the label set (the training file's, sorted) goes into the manifest
///
/// The training file makes the "train" split, the validation file (when given) the
/// "validation" split, labelled the same way (its held-out loss). The tokenizer must be the
/// pretrained model's: `data:DIR` takes the one a prepared pretraining data directory was made
/// with (the vocabulary identity then matches), `wordpiece:VOCAB.txt` a vocabulary file. Written
/// beside `out` and renamed into place at the end, as `troupe prepare` does.

#include <cstdint>
#include <filesystem>
#include <string>

#include "io/data/squad_features.hpp"

namespace troupe::io {

struct task_prepare_options {
  std::string task;                        ///< "squad" or "classify"
  std::filesystem::path train_file;
  std::filesystem::path validation_file;   ///< empty: no validation split
  std::string tokenizer_spec;              ///< "data:DIR" or "wordpiece:VOCAB.txt"
  std::filesystem::path out;
  bool lower_case = true;                  ///< with wordpiece:VOCAB.txt (data:DIR says its own)
  int64_t max_seq_length = 0;              ///< 0: 384 for squad, 128 for classify
  int64_t doc_stride = 128;                ///< squad
  int64_t max_query_length = 64;           ///< squad
  uint64_t sequences_per_shard = 65536;
  bool overwrite = false;
};

struct task_prepare_summary {
  uint64_t train_examples = 0;       ///< questions or sentences
  uint64_t train_sequences = 0;      ///< windows or sentences
  uint64_t validation_examples = 0;
  uint64_t validation_sequences = 0;
  uint64_t skipped = 0;              ///< squad: questions whose answer is not in their context
  std::vector<std::string> labels;   ///< classify
};

/// Throws troupe::error naming the option, file, record and field of the first problem, before
/// anything is written.
task_prepare_summary prepare_task_data(const task_prepare_options& options);

}  // namespace troupe::io
