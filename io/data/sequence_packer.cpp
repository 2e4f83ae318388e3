#include "io/data/sequence_packer.hpp"

#include <algorithm>

#include "messages/error.hpp"

namespace troupe::io {
namespace {

/// [CLS] first [SEP] second [SEP] (no second part: [CLS] first [SEP]).
packed_sequence build_sequence(const std::vector<int32_t>& first, const std::vector<int32_t>& second,
                               const special_token_ids& specials) {
  packed_sequence sequence;
  sequence.tokens.push_back(specials.cls);
  sequence.tokens.insert(sequence.tokens.end(), first.begin(), first.end());
  sequence.tokens.push_back(specials.sep);
  sequence.type_boundary = static_cast<uint16_t>(sequence.tokens.size());
  if (!second.empty()) {
    sequence.tokens.insert(sequence.tokens.end(), second.begin(), second.end());
    sequence.tokens.push_back(specials.sep);
  }
  return sequence;
}

std::vector<int32_t> concatenated(const std::vector<std::vector<int32_t>>& run, std::size_t from, std::size_t to) {
  std::vector<int32_t> tokens;
  for (std::size_t s = from; s < to; ++s) tokens.insert(tokens.end(), run[s].begin(), run[s].end());
  return tokens;
}

}  // namespace

document_packer::document_packer(uint32_t max_seq_length, const special_token_ids& specials, uint64_t seed,
                                 uint64_t stream, bool sentence_order)
    : budget_(max_seq_length - 3), specials_(specials), sentence_order_(sentence_order),
      generator_(seed * 0x9E3779B97F4A7C15ULL + stream) {
  TROUPE_ENFORCE(max_seq_length >= 8, "max_seq_length=", max_seq_length);
}

void document_packer::add(const std::vector<int32_t>& segment, std::vector<packed_sequence>& out) {
  // Over-long segments go in budget-sized pieces.
  for (std::size_t start = 0; start < segment.size(); start += budget_) {
    const std::size_t end = std::min(segment.size(), start + budget_);
    add_piece({segment.begin() + static_cast<std::ptrdiff_t>(start), segment.begin() + static_cast<std::ptrdiff_t>(end)},
              out);
  }
}

void document_packer::add_piece(std::vector<int32_t> piece, std::vector<packed_sequence>& out) {
  if (!run_.empty() && run_tokens_ + piece.size() > budget_) emit(out);
  run_tokens_ += piece.size();
  run_.push_back(std::move(piece));
}

void document_packer::finish(std::vector<packed_sequence>& out) { emit(out); }

void document_packer::emit(std::vector<packed_sequence>& out) {
  if (run_.empty()) return;
  std::vector<int32_t> a, b;
  if (run_.size() > 1) {
    const auto a_segments = std::uniform_int_distribution<std::size_t>(1, run_.size() - 1)(generator_);
    a = concatenated(run_, 0, a_segments);
    b = concatenated(run_, a_segments, run_.size());
  } else if (sentence_order_ && run_[0].size() > 1) {  // one segment: cut it between two tokens
    const auto cut = std::uniform_int_distribution<std::size_t>(1, run_[0].size() - 1)(generator_);
    a.assign(run_[0].begin(), run_[0].begin() + static_cast<std::ptrdiff_t>(cut));
    b.assign(run_[0].begin() + static_cast<std::ptrdiff_t>(cut), run_[0].end());
  } else {
    a = run_[0];
  }
  if (sentence_order_) {
    const bool swapped = !b.empty() && std::uniform_int_distribution<int>(0, 1)(generator_) == 1;
    out.push_back(swapped ? build_sequence(b, a, specials_) : build_sequence(a, b, specials_));
    out.back().sentence_order = swapped ? 1 : 0;
  } else {
    out.push_back(build_sequence(a, b, specials_));
  }
  run_.clear();
  run_tokens_ = 0;
}

std::vector<packed_sequence> pack_document(const std::vector<std::vector<int32_t>>& segments,
                                           uint32_t max_seq_length, const special_token_ids& specials,
                                           uint64_t seed, uint64_t document_index, bool sentence_order) {
  document_packer packer(max_seq_length, specials, seed, document_index, sentence_order);
  std::vector<packed_sequence> sequences;
  for (const auto& segment : segments) packer.add(segment, sequences);
  packer.finish(sequences);
  return sequences;
}

}  // namespace troupe::io
