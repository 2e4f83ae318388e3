#include <spdlog/spdlog.h>

#include <memory>

#include "io/corpus_preparer.hpp"
#include "tools/commands/commands.hpp"

namespace troupe::tools {

void add_prepare_command(CLI::App& app) {
  auto options = std::make_shared<io::prepare_options>();
  auto* command = app.add_subcommand("prepare", "tokenize UTF-8 text into packed, sharded training data");
  command->add_option("--input", options->inputs, "text files or directories (one document per file)")
      ->required();
  command->add_option("--tokenizer", options->tokenizer_spec, "wordpiece:VOCAB.txt or sentencepiece:VOCAB_SIZE")
      ->required();
  command->add_option("--out", options->out, "data directory to create")->required();
  command->add_option("--max-seq-length", options->max_seq_length, "tokens per sequence")->capture_default_str();
  command->add_option("--validation-fraction", options->validation_fraction,
                      "share of documents held out for validation")->capture_default_str();
  command->add_option("--seed", options->seed, "seed of the segment split")->capture_default_str();
  command->add_option("--sequences-per-shard", options->sequences_per_shard, "sequences per shard file")->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_flag("--overwrite", options->overwrite, "replace an existing output directory");
  command->add_flag("!--cased", options->lower_case, "WordPiece: keep case and accents (cased vocabularies)");
  command->callback([options] {
    auto summary = io::prepare_corpus(*options);
    spdlog::info("prepared {}: {} documents, {} train + {} validation sequences, {} tokens", options->out.string(),
                 summary.documents, summary.train_sequences, summary.validation_sequences, summary.tokens);
  });
}

}  // namespace troupe::tools
