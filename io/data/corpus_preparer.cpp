#include "io/data/corpus_preparer.hpp"

#include <spdlog/spdlog.h>

#include <deque>
#include <fstream>
#include <future>
#include <memory>

#include "io/data/corpus_router.hpp"
#include "io/data/data_tokenizer.hpp"
#include "io/data/document_reader.hpp"
#include "io/data/part_tokenizer.hpp"
#include "io/data/split_writer.hpp"
#include "io/data/token_dataset.hpp"
#include "io/os/file_util.hpp"
#include "io/os/task_pool.hpp"
#include "io/text/hf_tokenizer_json.hpp"
#include "io/text/sentencepiece_tokenizer.hpp"
#include "io/text/wordpiece_tokenizer.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point start) { return std::chrono::duration<double>(clock::now() - start).count(); }

document_reader_options reader_options(const prepare_options& options) {
  document_reader_options reader;
  reader.format = options.format;
  reader.codec = options.codec;
  reader.batch_bytes = options.batch_bytes;
  return reader;
}

part_text_options text_options(const prepare_options& options) {
  part_text_options text;
  text.format = options.format;
  if (options.format == corpus_format::jsonl) text.field_path = jsonl_field_path(options.jsonl_field);
  text.field_name = options.jsonl_field;
  return text;
}

/// SentencePiece learns its pieces from every sentence of the corpus, read once before the
/// preparation proper (bad records are left out here and reported there).
void write_sentences(const prepare_options& options, const std::filesystem::path& file) {
  std::ofstream out(file);
  document_reader reader(options.inputs, reader_options(options));
  const auto text = text_options(options);
  for (auto batch = reader.next_batch(); !batch.empty(); batch = reader.next_batch())
    for (const auto& part : batch) visit_sentences(part, text, [&](std::string_view sentence) { out << sentence << '\n'; });
}

std::unique_ptr<tokenizer> make_tokenizer(const prepare_options& options, const std::filesystem::path& work_dir) {
  const auto [kind, argument] = parse_tokenizer_spec(options.tokenizer_spec);
  if (kind == "wordpiece" && std::filesystem::path(argument).extension() == ".json")
    return std::make_unique<wordpiece_tokenizer>(
        wordpiece_from_tokenizer_json(argument, wordpiece_options{options.lower_case, 100}));
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
    write_sentences(options, sentences_file);
    sentencepiece_tokenizer::train(sentences_file, vocab_size, work_dir / "spm");
    std::filesystem::remove(sentences_file);
    std::filesystem::remove(work_dir / "spm.vocab");
    return std::make_unique<sentencepiece_tokenizer>(work_dir / "spm.model");
  }
  throw make_error("--tokenizer: expected wordpiece:VOCAB.txt, wordpiece:tokenizer.json or sentencepiece:VOCAB_SIZE, "
                   "got '", options.tokenizer_spec, "'");
}

/// "1.2 of 20.0 GB read (45.3 MB/s), 12345 documents, about 7 min left", every `every`.
class progress_line {
 public:
  progress_line(const document_reader& reader, std::chrono::milliseconds every)
      : reader_(reader), every_(every), start_(clock::now()), next_(start_ + every) {}

  void update(uint64_t documents) {
    if (clock::now() < next_) return;
    next_ = clock::now() + every_;
    spdlog::info("prepare: {}", text(documents));
  }
  std::string text(uint64_t documents) const {
    const double done = static_cast<double>(reader_.bytes_read()), total = static_cast<double>(reader_.total_bytes());
    const double seconds = seconds_since(start_), rate = seconds > 0 ? done / seconds : 0;
    char line[200];
    std::snprintf(line, sizeof line, "%.1f of %.1f MB read (%.1f MB/s), %llu documents, about %.0f s left", done / 1e6,
                  total / 1e6, rate / 1e6, static_cast<unsigned long long>(documents),
                  rate > 0 ? (total - done) / rate : 0.0);
    return line;
  }

 private:
  const document_reader& reader_;
  std::chrono::milliseconds every_;
  clock::time_point start_, next_;
};

/// Reads, tokenizes on `threads` threads and routes the parts in the reader's order.
void tokenize_in_order(document_reader& reader, const tokenizer& tokens, corpus_router& router,
                       const prepare_options& options) {
  const auto text = text_options(options);
  progress_line progress(reader, options.progress_every);
  auto take = [&](std::vector<tokenized_part>&& parts) {
    router.take(std::move(parts));
    progress.update(router.counts().read());
  };
  std::unique_ptr<task_pool> pool;
  if (options.threads > 1) pool = std::make_unique<task_pool>(options.threads);
  std::deque<std::future<std::vector<tokenized_part>>> in_flight;
  for (;;) {
    if (options.interrupted && options.interrupted())
      throw make_error("interrupted after ", progress.text(router.counts().read()), "; nothing was written to ",
                       options.out.string());
    auto batch = reader.next_batch();
    if (batch.empty()) break;
    if (!pool) {
      take(tokenize_parts(batch, tokens, text));
      continue;
    }
    in_flight.push_back(
        pool->submit([batch = std::move(batch), &tokens, &text] { return tokenize_parts(batch, tokens, text); }));
    for (; in_flight.size() >= 2 * options.threads; in_flight.pop_front()) take(in_flight.front().get());
  }
  for (; !in_flight.empty(); in_flight.pop_front()) take(in_flight.front().get());
}

void check_options(const prepare_options& options) {
  if (options.inputs.empty()) throw make_error("--input: no input files or directories given");
  if (options.max_seq_length < 8 || options.max_seq_length > 65535)
    throw make_error("--max-seq-length: expected 8..65535, got ", options.max_seq_length);
  if (!(options.validation_fraction >= 0.0 && options.validation_fraction < 1.0))
    throw make_error("--validation-fraction: expected a value in [0, 1), got ", options.validation_fraction);
  if (options.threads < 1 || options.threads > 1024)
    throw make_error("--threads: expected 1..1024, got ", options.threads);
  if (options.format == corpus_format::jsonl) jsonl_field_path(options.jsonl_field);  // throws naming the flag
}

}  // namespace

prepare_summary prepare_corpus(const prepare_options& options) {
  check_options(options);
  refuse_existing(options.out, options.overwrite);
  const auto start = clock::now();
  document_reader reader(options.inputs, reader_options(options));

  prepare_summary summary;
  write_data_directory(options.out, options.overwrite, [&](const std::filesystem::path& work_dir) {
    auto tok = make_tokenizer(options, work_dir);
    split_writer train("train", work_dir, options.max_seq_length, options.sequences_per_shard, *tok);
    split_writer validation("validation", work_dir, options.max_seq_length, options.sequences_per_shard, *tok);
    corpus_router_options routing;
    routing.validation_fraction = options.validation_fraction;
    routing.seed = options.seed;
    routing.max_seq_length = options.max_seq_length;
    routing.sentence_order = options.sentence_order;
    routing.drop_duplicates = options.drop_duplicates;
    routing.skip_bad_records = options.skip_bad_records;
    corpus_router router(train, validation, tok->specials(), reader.files(), routing);
    tokenize_in_order(reader, *tok, router, options);
    const auto counts = router.finish();
    if (counts.train_sequences == 0)
      throw make_error("--input: the inputs hold no text to train on (", reader.files().size(), " files, ",
                       counts.read(), " documents)");
    summary = {counts.documents,  counts.train_sequences, counts.validation_sequences, counts.tokens,
               counts.duplicates, counts.empty_documents, counts.bad_records,          reader.total_bytes(), 0};
    auto manifest = manifest_for_tokenizer(*tok, work_dir, options.max_seq_length, options.lower_case);
    manifest.sentence_order = options.sentence_order;
    manifest.splits = {train.finish(), validation.finish()};
    return manifest;
  });
  summary.seconds = seconds_since(start);
  return summary;
}

}  // namespace troupe::io
