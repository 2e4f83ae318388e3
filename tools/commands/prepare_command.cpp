#include <spdlog/spdlog.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "io/data/corpus_preparer.hpp"
#include "io/data/synthetic_dataset.hpp"
#include "io/data/task_preparer.hpp"
#include "io/data/token_dataset.hpp"
#include "io/os/file_util.hpp"
#include "io/os/remove_tree.hpp"
#include "messages/error.hpp"
#include "tools/commands/commands.hpp"

namespace troupe::tools {
namespace {

struct prepare_arguments {
  io::prepare_options corpus;
  std::string verify;          ///< a data directory to check fully
  uint64_t synthetic = 0;      ///< random sequences instead of a corpus
  int64_t vocab_size = 30522;  ///< of the synthetic data
  std::string task = "mlm";    ///< "sop": ALBERT's sentence-order labels too; "squad", "classify": fine-tuning
  io::task_prepare_options fine_tuning;  ///< --task squad|classify
  std::string format;                    ///< --format: file, bert, jsonl
  std::string compression = "auto";      ///< --compression
};

// Ctrl-C (or SIGTERM) during a preparation: the handler's only state (a handler may touch nothing
// else); the preparation polls it between batches, says how far it got and removes its temporary
// directory. A second Ctrl-C ends the process at once (SA_RESETHAND).
volatile sig_atomic_t interrupted_by = 0;

void note_interrupt(int signal) { interrupted_by = signal; }

class interrupt_catcher {
 public:
  interrupt_catcher() {
    struct sigaction note {};
    note.sa_handler = note_interrupt;
    sigemptyset(&note.sa_mask);
    note.sa_flags = SA_RESETHAND | SA_RESTART;
    ::sigaction(SIGINT, &note, &old_int_);
    ::sigaction(SIGTERM, &note, &old_term_);
  }
  ~interrupt_catcher() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  interrupt_catcher(const interrupt_catcher&) = delete;
  interrupt_catcher& operator=(const interrupt_catcher&) = delete;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

bool is_fine_tuning(const std::string& task) { return task == "squad" || task == "classify"; }

void prepare_fine_tuning(const prepare_arguments& args, bool length_given) {
  auto options = args.fine_tuning;
  options.task = args.task;
  if (args.corpus.inputs.size() != 1)
    throw make_error("--input: expected the task's training file (one file) with --task ", args.task, ", got ",
                     args.corpus.inputs.size());
  options.train_file = args.corpus.inputs.front();
  options.tokenizer_spec = args.corpus.tokenizer_spec;
  options.out = args.corpus.out;
  options.lower_case = args.corpus.lower_case;
  options.max_seq_length = length_given ? args.corpus.max_seq_length : 0;
  options.sequences_per_shard = args.corpus.sequences_per_shard;
  options.overwrite = args.corpus.overwrite;
  const auto summary = io::prepare_task_data(options);
  spdlog::info("prepared {} ({}): {} training examples ({} sequences), {} validation examples ({} sequences){}",
               options.out.string(), args.task, summary.train_examples, summary.train_sequences,
               summary.validation_examples, summary.validation_sequences,
               summary.skipped > 0 ? detail::concat("; ", summary.skipped,
                                                    " questions skipped: their answer text is not in their context")
                                   : std::string());
}

void prepare(const prepare_arguments& args, bool length_given) {
  if (is_fine_tuning(args.task)) {
    prepare_fine_tuning(args, length_given);
    return;
  }
  if (!args.fine_tuning.validation_file.empty())
    throw error("prepare: --validation is for --task squad or classify (a corpus is split by --validation-fraction)");
  if (!args.verify.empty()) {
    const auto start = std::chrono::steady_clock::now();
    const uint64_t sequences = io::verify_dataset(args.verify);
    spdlog::info("verified {}: {} sequences, every checksum and token id ({:.1f} s)", args.verify, sequences,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return;
  }
  if (args.corpus.out.empty()) throw error("prepare: --out is required");
  if (args.synthetic > 0) {
    const auto& out = args.corpus.out;
    if (args.corpus.max_seq_length < 8 || args.corpus.max_seq_length > 65535)
      throw make_error("--max-seq-length: expected 8..65535, got ", args.corpus.max_seq_length);
    io::refuse_existing(out, args.corpus.overwrite);
    // Written beside `out` and renamed over it at the end, as `prepare` does for a corpus: a
    // failure leaves the old data as it was.
    const auto temporary = std::filesystem::path(out.string() + ".tmp-" + std::to_string(::getpid()));
    try {
      io::write_synthetic_dataset(temporary, args.synthetic, args.corpus.max_seq_length, args.vocab_size,
                                  args.corpus.seed, args.corpus.sequences_per_shard);
    } catch (...) {
      io::remove_tree_quietly(temporary);
      throw;
    }
    io::move_directory_into_place(temporary, out);
    spdlog::info("prepared {}: {} random sequences of {} tokens", args.corpus.out.string(), args.synthetic,
                 args.corpus.max_seq_length);
    return;
  }
  if (args.corpus.inputs.empty()) throw error("prepare: --input is required (or --synthetic N, or --verify DIR)");
  if (args.corpus.tokenizer_spec.empty()) throw error("prepare: --tokenizer is required with --input");
  const interrupt_catcher interrupts;
  auto options = args.corpus;
  options.interrupted = [] { return interrupted_by != 0; };
  if (!args.format.empty()) options.format = *io::corpus_format_named(args.format);
  if (args.compression != "auto") options.codec = io::compression_named(args.compression);
  const auto summary = io::prepare_corpus(options);
  spdlog::info("prepared {}: {} documents, {} train + {} validation sequences, {} tokens; {:.1f} MB in {:.1f} s "
               "({:.1f} MB/s on {} threads){}{}{}",
               options.out.string(), summary.documents, summary.train_sequences, summary.validation_sequences,
               summary.tokens, static_cast<double>(summary.bytes) / 1e6, summary.seconds,
               static_cast<double>(summary.bytes) / 1e6 / std::max(summary.seconds, 1e-9), options.threads,
               summary.duplicates > 0 ? detail::concat("; ", summary.duplicates, " duplicate documents dropped") : "",
               summary.empty_documents > 0 ? detail::concat("; ", summary.empty_documents, " documents without text")
                                           : "",
               summary.bad_records > 0 ? detail::concat("; ", summary.bad_records, " bad records skipped") : "");
}

}  // namespace

void add_prepare_command(CLI::App& app) {
  auto args = std::make_shared<prepare_arguments>();
  auto& options = args->corpus;
  auto* command = app.add_subcommand("prepare", "tokenize UTF-8 text into packed, sharded training data");
  auto* input = command->add_option("--input", options.inputs, "text files or directories (the documents: --format)");
  command->add_option("--format", args->format,
                      "file: each file is one document (default); bert: a blank line between documents (BERT's "
                      "create_pretraining_data input); jsonl: JSON Lines, a document per line (--jsonl-field)")
      ->check(CLI::IsMember({"file", "bert", "jsonl"}));
  command->add_option("--jsonl-field", options.jsonl_field, "jsonl: the field holding the text (a.b for nested keys)")
      ->capture_default_str();
  command->add_option("--compression", args->compression, "auto (by extension: .gz, .zst), none, gzip or zstd")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "none", "gzip", "zstd"}));
  options.threads = std::max(1u, std::thread::hardware_concurrency());
  command->add_option("--threads", options.threads, "tokenizing threads (the output is the same for any number)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1024u));
  command->add_flag("--dedupe", options.drop_duplicates,
                    "drop documents whose text (its key: docs/data.md) was seen before, counting them");
  command->add_option("--skip-bad-records", options.skip_bad_records,
                      "skip up to N bad records (invalid UTF-8 lines, malformed JSON lines, lines without the field, "
                      "the rest of a truncated .gz/.zst), each warned and counted; one more is an error")
      ->capture_default_str();
  command->add_option("--tokenizer", options.tokenizer_spec,
                      "wordpiece:VOCAB.txt, wordpiece:tokenizer.json (HF's, a BERT tokenizer) or sentencepiece:VOCAB_SIZE");
  command->add_option("--out", options.out, "data directory to create");
  command->add_option("--max-seq-length", options.max_seq_length, "tokens per sequence")->capture_default_str();
  command->add_option("--validation-fraction", options.validation_fraction,
                      "share of documents held out for validation")->capture_default_str();
  command->add_option("--seed", options.seed, "seed of the segment split (or of the synthetic tokens)")
      ->capture_default_str();
  command->add_option("--sequences-per-shard", options.sequences_per_shard, "sequences per shard file")->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_flag("--overwrite", options.overwrite, "replace an existing output directory");
  command->add_flag("!--cased", options.lower_case, "WordPiece: keep case and accents (cased vocabularies)");
  auto* task = command->add_option("--task", args->task,
                                   "mlm; sop: also ALBERT's sentence-order labels (segment pairs from one document, "
                                   "swapped half the time); squad or classify: a fine-tuning task's file (--input) "
                                   "as model inputs with their labels")
                   ->capture_default_str()
                   ->check(CLI::IsMember({"mlm", "sop", "squad", "classify"}));
  command->add_option("--validation", args->fine_tuning.validation_file,
                      "squad/classify: the task's validation file (the validation split)");
  command->add_option("--doc-stride", args->fine_tuning.doc_stride, "squad: pieces between window starts")
      ->capture_default_str();
  command->add_option("--max-query-length", args->fine_tuning.max_query_length, "squad: question pieces kept")
      ->capture_default_str();
  auto* synthetic = command->add_option("--synthetic", args->synthetic,
                                        "write N random sequences instead of a corpus (benchmarks)")
                        ->check(CLI::PositiveNumber)
                        ->excludes(input)
                        ->excludes(task);
  command->add_option("--vocab-size", args->vocab_size, "vocabulary of the --synthetic data")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{111}, int64_t{1} << 24));  // the generator needs ids past the 104 special ones
  command->add_option("--verify", args->verify,
                      "check every shard of an existing data directory in full (checksums, token ids) and refresh "
                      "its verification stamps")
      ->excludes(input)
      ->excludes(synthetic);
  auto* length = command->get_option("--max-seq-length");
  command->callback([args, length] {
    args->corpus.sentence_order = args->task == "sop";
    prepare(*args, length->count() > 0);
  });
}

}  // namespace troupe::tools
