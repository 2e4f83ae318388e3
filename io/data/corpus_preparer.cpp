#include "io/data/corpus_preparer.hpp"

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>

#include "io/data/data_tokenizer.hpp"
#include "io/data/sequence_packer.hpp"
#include "io/data/split_writer.hpp"
#include "io/data/token_dataset.hpp"
#include "io/os/file_util.hpp"
#include "io/os/remove_tree.hpp"
#include "io/text/sentence_splitter.hpp"
#include "io/text/sentencepiece_tokenizer.hpp"
#include "io/text/utf8.hpp"
#include "io/text/wordpiece_tokenizer.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

constexpr std::size_t huge_line_bytes = 1 << 20;

struct document {
  std::filesystem::path path;
  std::string name;  ///< path relative to its input, the split key
  uint64_t key = 0;
};

/// Adds the visible regular files under `dir` (symbolic links to directories are not followed)
/// to `files`. A plain directory walk rather than std::filesystem::recursive_directory_iterator,
/// whose copy in PyTorch 2.x's libtorch.so can be the one a program binds to (io/os/remove_tree.hpp).
void collect_files(const std::filesystem::path& dir, std::vector<std::filesystem::path>& files) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().front() == '.') continue;
    if (entry.is_directory() && !entry.is_symlink())
      collect_files(entry.path(), files);
    else if (entry.is_regular_file())
      files.push_back(entry.path());
  }
}

std::vector<document> find_documents(const std::vector<std::filesystem::path>& inputs) {
  std::vector<document> documents;
  for (const auto& input : inputs) {
    if (!std::filesystem::exists(input)) throw make_error(input.string(), ": input not found");
    if (std::filesystem::is_regular_file(input)) {
      documents.push_back({input, input.filename().string(), 0});
      continue;
    }
    std::vector<std::filesystem::path> files;
    collect_files(input, files);
    std::sort(files.begin(), files.end());
    for (const auto& file : files) documents.push_back({file, std::filesystem::relative(file, input).string(), 0});
  }
  for (auto& doc : documents) doc.key = XXH64(doc.name.data(), doc.name.size(), 0);
  return documents;
}

/// Reads a document as sentences, checking UTF-8 line by line.
std::vector<std::string> read_sentences(const document& doc) {
  std::ifstream in(doc.path, std::ios::binary);
  if (!in) throw make_error(doc.path.string(), ": cannot open");
  std::vector<std::string> sentences;
  std::vector<char32_t> scratch;
  std::string line;
  uint64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (auto bad = decode_utf8(line, scratch))
      throw make_error(doc.path.string(), ":", line_number, ": invalid UTF-8 at byte ", *bad + 1,
                       " of the line (convert the file to UTF-8, e.g. with iconv)");
    if (line.size() > huge_line_bytes)
      spdlog::warn("{}:{}: line of {} bytes; splitting it into sentence-sized pieces", doc.path.string(),
                   line_number, line.size());
    for (auto sentence : split_sentences(line)) sentences.emplace_back(sentence);
  }
  return sentences;
}

std::unique_ptr<tokenizer> make_tokenizer(const prepare_options& options, const std::vector<document>& documents,
                                          const std::filesystem::path& work_dir) {
  const auto [kind, argument] = parse_tokenizer_spec(options.tokenizer_spec);
  if (kind == "wordpiece" && !argument.empty())
    return std::make_unique<wordpiece_tokenizer>(
        wordpiece_tokenizer::from_file(argument, wordpiece_options{options.lower_case, 100}));
  if (kind == "sentencepiece" && !argument.empty()) {
    int vocab_size = 0;
    try {
      vocab_size = std::stoi(argument);
    } catch (const std::exception&) {
    }
    if (vocab_size < 16)
      throw make_error("--tokenizer sentencepiece:VOCAB_SIZE: expected a vocabulary size >= 16, got '", argument, "'");
    const auto sentences_file = work_dir / "spm-train.txt";
    {
      std::ofstream out(sentences_file);
      for (const auto& doc : documents)
        for (const auto& sentence : read_sentences(doc)) out << sentence << '\n';
    }
    sentencepiece_tokenizer::train(sentences_file, vocab_size, work_dir / "spm");
    std::filesystem::remove(sentences_file);
    std::filesystem::remove(work_dir / "spm.vocab");
    return std::make_unique<sentencepiece_tokenizer>(work_dir / "spm.model");
  }
  throw make_error("--tokenizer: expected wordpiece:VOCAB.txt or sentencepiece:VOCAB_SIZE, got '",
                   options.tokenizer_spec, "'");
}

}  // namespace

prepare_summary prepare_corpus(const prepare_options& options) {
  if (options.inputs.empty()) throw make_error("--input: no input files or directories given");
  if (options.max_seq_length < 8 || options.max_seq_length > 65535)
    throw make_error("--max-seq-length: expected 8..65535, got ", options.max_seq_length);
  if (!(options.validation_fraction >= 0.0 && options.validation_fraction < 1.0))
    throw make_error("--validation-fraction: expected a value in [0, 1), got ", options.validation_fraction);
  refuse_existing(options.out, options.overwrite);

  auto documents = find_documents(options.inputs);
  if (documents.empty()) throw make_error("--input: no files found in the given inputs");

  prepare_summary summary;
  write_data_directory(options.out, options.overwrite, [&](const std::filesystem::path& work_dir) {
    auto tok = make_tokenizer(options, documents, work_dir);

    // The validation documents are the first ceil(fraction × n) in xxh64 order (at least one
    // when there are two or more documents and the fraction is positive).
    std::vector<std::size_t> order(documents.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](auto a, auto b) {
      return std::tie(documents[a].key, documents[a].name) < std::tie(documents[b].key, documents[b].name);
    });
    auto validation_count = static_cast<std::size_t>(std::ceil(options.validation_fraction * documents.size()));
    if (documents.size() < 2) validation_count = 0;
    validation_count = std::min(validation_count, documents.size() - 1);
    std::vector<bool> is_validation(documents.size(), false);
    for (std::size_t i = 0; i < validation_count; ++i) is_validation[order[i]] = true;

    split_writer train("train", work_dir, options.max_seq_length, options.sequences_per_shard, *tok);
    split_writer validation("validation", work_dir, options.max_seq_length, options.sequences_per_shard, *tok);
    for (std::size_t d = 0; d < documents.size(); ++d) {
      std::vector<std::vector<int32_t>> segments;
      for (const auto& sentence : read_sentences(documents[d])) {
        auto ids = tok->encode(sentence);
        if (!ids.empty()) segments.push_back(std::move(ids));
      }
      if (segments.empty()) {
        spdlog::warn("{}: no text; skipped", documents[d].path.string());
        continue;
      }
      auto sequences =
          pack_document(segments, options.max_seq_length, tok->specials(), options.seed, d, options.sentence_order);
      ++summary.documents;
      for (const auto& sequence : sequences) summary.tokens += sequence.tokens.size();
      (is_validation[d] ? validation : train).add_document(sequences);
      (is_validation[d] ? summary.validation_sequences : summary.train_sequences) += sequences.size();
    }
    if (summary.train_sequences == 0)
      throw make_error("--input: the inputs hold no text to train on (", documents.size(), " files, all empty)");

    auto manifest = manifest_for_tokenizer(*tok, work_dir, options.max_seq_length, options.lower_case);
    manifest.sentence_order = options.sentence_order;
    manifest.splits = {train.finish(), validation.finish()};
    return manifest;
  });
  return summary;
}

}  // namespace troupe::io
