#pragma once
/// Where each document of `troupe prepare` goes, in corpus order: packed (io/data/sequence_packer)
/// into the train or the validation split, or dropped as an exact duplicate; and what happens to bad
/// records. Fed the tokenizing threads' results in the reader's order, so its output does not
/// depend on how many threads made them.
///
/// The validation split holds the documents whose key (io/data/corpus_format.hpp) falls in the
/// lowest `validation_fraction` of the 64-bit range: the choice is the document's own, made as it
/// streams by, the same for the same text in any file, format or order, and an exact duplicate
/// can never sit on both sides. A share rather than a count, so a small corpus can draw none: then
/// the train document with the lowest key goes to validation instead (when there are two or more
/// documents and the fraction is positive). To have it at hand, the lowest-keyed train document so
/// far is held back (only while no validation document was seen, and only up to `held_tokens`).

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "io/data/part_tokenizer.hpp"
#include "io/data/sequence_packer.hpp"
#include "io/data/split_writer.hpp"

namespace troupe::io {

struct corpus_router_options {
  double validation_fraction = 0.05;
  uint64_t seed = 42;            ///< of the packing (with each document's key)
  uint32_t max_seq_length = 128;
  bool sentence_order = false;   ///< `--task sop`
  bool drop_duplicates = false;  ///< `--dedupe`: a document whose key was seen before is dropped
  uint64_t skip_bad_records = 0; ///< bad records skipped (each warned); one more is an error
  std::size_t held_tokens = std::size_t{1} << 20;
};

struct corpus_counts {
  uint64_t documents = 0;  ///< written (validation included)
  uint64_t train_sequences = 0;
  uint64_t validation_sequences = 0;
  uint64_t tokens = 0;
  uint64_t duplicates = 0;       ///< dropped by `--dedupe`
  uint64_t empty_documents = 0;  ///< no token in them
  uint64_t bad_records = 0;      ///< skipped
  /// Documents met so far, whatever became of them.
  uint64_t read() const { return documents + empty_documents + duplicates; }
};

class corpus_router {
 public:
  /// `files` names the parts' files in messages.
  corpus_router(split_writer& train, split_writer& validation, const special_token_ids& specials,
                const std::vector<std::filesystem::path>& files, corpus_router_options options);

  /// The next parts, in corpus order. Throws troupe::error naming the file and line of a bad record
  /// past `skip_bad_records`.
  void take(std::vector<tokenized_part>&& parts);
  /// After the last part: places the held document; the counts.
  corpus_counts finish();
  /// The counts so far (the split sizes only after finish()).
  const corpus_counts& counts() const { return counts_; }

 private:
  enum class destination { train, validation, dropped };
  void bad_record(const tokenized_part& part);
  void start_document(uint64_t key);
  void deliver(std::vector<packed_sequence>& sequences);
  void end_document();
  void write_held(split_writer& split);

  split_writer& train_;
  split_writer& validation_;
  special_token_ids specials_;
  const std::vector<std::filesystem::path>& files_;
  corpus_router_options options_;
  corpus_counts counts_;
  std::unordered_set<uint64_t> seen_keys_;  ///< with drop_duplicates
  // The document in flight.
  std::optional<document_packer> packer_;
  destination destination_ = destination::train;
  uint64_t key_ = 0;
  uint64_t document_tokens_ = 0;
  bool holding_ = false;  ///< its sequences go to held_ (it may become the stand-in validation document)
  std::vector<packed_sequence> holding_sequences_;
  // The stand-in validation document.
  std::optional<uint64_t> held_key_;
  std::vector<packed_sequence> held_;
  std::vector<packed_sequence> scratch_;
};

}  // namespace troupe::io
