#include "io/data/task_preparer.hpp"

#include <algorithm>
#include <memory>
#include <tuple>

#include "io/data/classification_file.hpp"
#include "io/data/data_tokenizer.hpp"
#include "io/data/sentence_pair_encoding.hpp"
#include "io/data/split_writer.hpp"
#include "io/data/squad_file.hpp"
#include "io/data/token_dataset.hpp"
#include "io/text/wordpiece_tokenizer.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

struct opened_tokenizer {
  std::unique_ptr<tokenizer> tokens;
  bool lower_case = true;
};

opened_tokenizer open_tokenizer(const task_prepare_options& options) {
  const auto [kind, argument] = parse_tokenizer_spec(options.tokenizer_spec);
  if (kind == "data" && !argument.empty()) {
    const auto manifest = dataset_manifest::from_file(std::filesystem::path(argument) / "manifest.json");
    return {open_data_tokenizer(manifest, argument), manifest.lower_case};
  }
  if (kind == "wordpiece" && !argument.empty())
    return {std::make_unique<wordpiece_tokenizer>(
                wordpiece_tokenizer::from_file(argument, wordpiece_options{options.lower_case, 100})),
            options.lower_case};
  throw make_error("--tokenizer: expected data:DIR (the tokenizer of a prepared pretraining data directory) or ",
                   "wordpiece:VOCAB.txt for a fine-tuning task, got '", options.tokenizer_spec, "'");
}

packed_sequence squad_sequence(const squad_feature& feature) {
  packed_sequence sequence;
  sequence.tokens = feature.input_ids;
  sequence.type_boundary = static_cast<uint16_t>(feature.context_offset);
  sequence.task_labels = std::array<int32_t, 2>{static_cast<int32_t>(feature.start_position),
                                                static_cast<int32_t>(feature.end_position)};
  return sequence;
}

/// One split of SQuAD windows; returns {questions written, sequences}.
std::pair<uint64_t, uint64_t> write_squad_split(const std::filesystem::path& file, split_writer& split,
                                                const tokenizer& tokens, const squad_feature_settings& settings,
                                                uint64_t& skipped) {
  const auto dataset = read_squad_file(file);
  uint64_t questions = 0, sequences = 0;
  for (std::size_t q = 0; q < dataset.questions.size(); ++q) {
    const auto features = make_squad_features(dataset.questions[q], q, tokens, settings, true);
    if (features.empty()) {
      ++skipped;
      continue;
    }
    std::vector<packed_sequence> windows;
    for (const auto& feature : features) windows.push_back(squad_sequence(feature));
    split.add_document(windows);
    ++questions;
    sequences += windows.size();
  }
  return {questions, sequences};
}

uint64_t write_classification_split(const classification_data& data, const std::vector<std::string>& labels,
                                    split_writer& split, const tokenizer& tokens, int64_t max_seq_length) {
  const auto classes = label_indices(data, labels);
  for (std::size_t e = 0; e < data.examples.size(); ++e) {
    const auto& example = data.examples[e];
    const auto encoded = encode_sentences(tokens, example.text, example.pair, max_seq_length);
    packed_sequence sequence;
    sequence.tokens = encoded.input_ids;
    const auto second = std::find(encoded.token_types.begin(), encoded.token_types.end(), 1);
    sequence.type_boundary = static_cast<uint16_t>(second - encoded.token_types.begin());
    sequence.task_labels = std::array<int32_t, 2>{static_cast<int32_t>(classes[e]), 0};
    split.add_document({sequence});
  }
  return data.examples.size();
}

void check_options(const task_prepare_options& options) {
  if (options.task != "squad" && options.task != "classify")
    throw make_error("--task: expected squad or classify for a fine-tuning task, got '", options.task, "'");
  if (options.train_file.empty()) throw make_error("--input: the task's training file is required");
  if (options.out.empty()) throw make_error("--out is required");
  if (options.max_seq_length < 8 || options.max_seq_length > 65535)
    throw make_error("--max-seq-length: expected 8..65535, got ", options.max_seq_length);
  if (options.task == "squad")
    check_squad_feature_settings({options.max_seq_length, options.doc_stride, options.max_query_length});
}

}  // namespace

task_prepare_summary prepare_task_data(const task_prepare_options& given) {
  auto options = given;
  if (options.max_seq_length == 0) options.max_seq_length = options.task == "squad" ? 384 : 128;
  check_options(options);
  auto [tokens, lower_case] = open_tokenizer(options);
  // Read before anything is written: a bad file leaves no directory behind.
  classification_data train_text, validation_text;
  task_prepare_summary summary;
  if (options.task == "classify") {
    train_text = read_classification_file(options.train_file);
    if (!options.validation_file.empty()) validation_text = read_classification_file(options.validation_file);
    summary.labels = classification_labels(train_text);
    if (summary.labels.size() < 2)
      throw make_error(options.train_file.string(), ": label: expected at least 2 distinct labels, got ",
                       summary.labels.size());
  }
  write_data_directory(options.out, options.overwrite, [&](const std::filesystem::path& work_dir) {
    const auto length = static_cast<uint32_t>(options.max_seq_length);
    split_writer train("train", work_dir, length, options.sequences_per_shard, *tokens);
    split_writer validation("validation", work_dir, length, options.sequences_per_shard, *tokens);
    if (options.task == "squad") {
      const squad_feature_settings settings{options.max_seq_length, options.doc_stride, options.max_query_length};
      std::tie(summary.train_examples, summary.train_sequences) =
          write_squad_split(options.train_file, train, *tokens, settings, summary.skipped);
      if (!options.validation_file.empty())
        std::tie(summary.validation_examples, summary.validation_sequences) =
            write_squad_split(options.validation_file, validation, *tokens, settings, summary.skipped);
    } else {
      summary.train_examples = summary.train_sequences =
          write_classification_split(train_text, summary.labels, train, *tokens, options.max_seq_length);
      if (!options.validation_file.empty())
        summary.validation_examples = summary.validation_sequences =
            write_classification_split(validation_text, summary.labels, validation, *tokens, options.max_seq_length);
    }
    if (summary.train_sequences == 0)
      throw make_error(options.train_file.string(), ": no example to train on (every answer was outside its context)");

    auto manifest = manifest_for_tokenizer(*tokens, work_dir, length, lower_case);
    manifest.fine_tuning_task = options.task;
    manifest.labels = summary.labels;
    if (options.task == "squad") {
      manifest.doc_stride = options.doc_stride;
      manifest.max_query_length = options.max_query_length;
    }
    manifest.splits = {train.finish(), validation.finish()};
    if (manifest.splits.back().sequences == 0) manifest.splits.pop_back();
    return manifest;
  });
  return summary;
}

}  // namespace troupe::io
