#include "io/data/sequence_packer.hpp"

#include <random>

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

std::vector<packed_sequence> pack_document(const std::vector<std::vector<int32_t>>& segments,
                                           uint32_t max_seq_length, const special_token_ids& specials,
                                           uint64_t seed, uint64_t document_index, bool sentence_order) {
  TROUPE_ENFORCE(max_seq_length >= 8, "max_seq_length=", max_seq_length);
  const std::size_t budget = max_seq_length - 3;
  std::mt19937_64 generator(seed * 0x9E3779B97F4A7C15ULL + document_index);

  // Split over-long segments into budget-sized pieces.
  std::vector<std::vector<int32_t>> pieces;
  for (const auto& segment : segments) {
    for (std::size_t start = 0; start < segment.size(); start += budget) {
      std::size_t end = std::min(segment.size(), start + budget);
      pieces.emplace_back(segment.begin() + static_cast<std::ptrdiff_t>(start),
                          segment.begin() + static_cast<std::ptrdiff_t>(end));
    }
  }

  std::vector<packed_sequence> sequences;
  std::vector<std::vector<int32_t>> run;
  std::size_t run_tokens = 0;
  auto emit = [&] {
    if (run.empty()) return;
    std::vector<int32_t> a, b;
    if (run.size() > 1) {
      const auto a_segments = std::uniform_int_distribution<std::size_t>(1, run.size() - 1)(generator);
      a = concatenated(run, 0, a_segments);
      b = concatenated(run, a_segments, run.size());
    } else if (sentence_order && run[0].size() > 1) {  // one segment: cut it between two tokens
      const auto cut = std::uniform_int_distribution<std::size_t>(1, run[0].size() - 1)(generator);
      a.assign(run[0].begin(), run[0].begin() + static_cast<std::ptrdiff_t>(cut));
      b.assign(run[0].begin() + static_cast<std::ptrdiff_t>(cut), run[0].end());
    } else {
      a = run[0];
    }
    if (sentence_order) {
      const bool swapped = !b.empty() && std::uniform_int_distribution<int>(0, 1)(generator) == 1;
      sequences.push_back(swapped ? build_sequence(b, a, specials) : build_sequence(a, b, specials));
      sequences.back().sentence_order = swapped ? 1 : 0;
    } else {
      sequences.push_back(build_sequence(a, b, specials));
    }
    run.clear();
    run_tokens = 0;
  };
  for (auto& piece : pieces) {
    if (!run.empty() && run_tokens + piece.size() > budget) emit();
    run_tokens += piece.size();
    run.push_back(std::move(piece));
  }
  emit();
  return sequences;
}

}  // namespace troupe::io
