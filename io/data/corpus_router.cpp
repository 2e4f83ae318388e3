#include "io/data/corpus_router.hpp"

#include <spdlog/spdlog.h>

#include "messages/error.hpp"

namespace troupe::io {
namespace {

constexpr uint64_t bad_records_shown = 10;

/// Whether `key` lies in the lowest `fraction` of the 64-bit range.
bool in_validation(uint64_t key, double fraction) {
  return static_cast<double>(key >> 11) * 0x1.0p-53 < fraction;
}

}  // namespace

corpus_router::corpus_router(split_writer& train, split_writer& validation, const special_token_ids& specials,
                             const std::vector<std::filesystem::path>& files, corpus_router_options options)
    : train_(train), validation_(validation), specials_(specials), files_(files), options_(options) {}

void corpus_router::take(std::vector<tokenized_part>&& parts) {
  for (auto& part : parts) {
    if (!part.problem.empty()) {  // not a document boundary: a text line or a whole JSON record
      bad_record(part);
      continue;
    }
    if (part.first) start_document(part.key);
    if (!packer_) continue;  // a dropped duplicate
    for (const auto& segment : part.segments) {
      packer_->add(segment, scratch_);
      deliver(scratch_);
    }
    if (part.last) {
      packer_->finish(scratch_);
      deliver(scratch_);
      end_document();
    }
  }
}

void corpus_router::bad_record(const tokenized_part& part) {
  ++counts_.bad_records;
  const auto where = part.line > 0 ? detail::concat(files_[part.file].string(), ":", part.line, ": ") : std::string();
  const auto what = where + part.problem;
  if (counts_.bad_records > options_.skip_bad_records)
    throw make_error(what, options_.skip_bad_records == 0
                               ? std::string(" (--skip-bad-records N skips up to N bad records, counting them)")
                               : detail::concat(" (one more than --skip-bad-records ", options_.skip_bad_records, ")"));
  if (counts_.bad_records <= bad_records_shown)
    spdlog::warn("skipped a bad record: {}{}", what,
                 counts_.bad_records == bad_records_shown ? " (further ones are counted, not shown)" : "");
}

void corpus_router::start_document(uint64_t key) {
  key_ = key;
  document_tokens_ = 0;
  holding_ = false;
  packer_.reset();
  if (options_.drop_duplicates && !seen_keys_.insert(key).second) {
    ++counts_.duplicates;
    return;
  }
  destination_ = in_validation(key, options_.validation_fraction) ? destination::validation : destination::train;
  packer_.emplace(options_.max_seq_length, specials_, options_.seed, key, options_.sentence_order);
  const bool no_validation_yet = validation_.sequences() == 0 && options_.validation_fraction > 0;
  if (destination_ == destination::validation && held_key_) write_held(train_);
  holding_ = destination_ == destination::train && no_validation_yet && (!held_key_ || key < *held_key_);
}

void corpus_router::deliver(std::vector<packed_sequence>& sequences) {
  for (const auto& sequence : sequences) document_tokens_ += sequence.tokens.size();
  if (holding_) {
    holding_sequences_.insert(holding_sequences_.end(), std::make_move_iterator(sequences.begin()),
                              std::make_move_iterator(sequences.end()));
    if (document_tokens_ > options_.held_tokens) {  // too large to hold: it goes where it would have
      holding_ = false;
      train_.add_sequences(holding_sequences_);
      holding_sequences_.clear();
    }
  } else {
    (destination_ == destination::validation ? validation_ : train_).add_sequences(sequences);
  }
  sequences.clear();
}

void corpus_router::end_document() {
  packer_.reset();
  counts_.tokens += document_tokens_;
  if (document_tokens_ == 0) {
    ++counts_.empty_documents;
    return;
  }
  ++counts_.documents;
  if (!holding_) {
    (destination_ == destination::validation ? validation_ : train_).end_document();
    return;
  }
  if (held_key_) write_held(train_);  // the new one has the lower key
  held_ = std::move(holding_sequences_);
  holding_sequences_.clear();
  held_key_ = key_;
  holding_ = false;
}

void corpus_router::write_held(split_writer& split) {
  split.add_sequences(held_);
  split.end_document();
  held_.clear();
  held_key_.reset();
}

corpus_counts corpus_router::finish() {
  if (held_key_) {
    const bool stand_in = validation_.sequences() == 0 && counts_.documents >= 2 && options_.validation_fraction > 0;
    write_held(stand_in ? validation_ : train_);
  }
  counts_.train_sequences = train_.sequences();
  counts_.validation_sequences = validation_.sequences();
  return counts_;
}

}  // namespace troupe::io
