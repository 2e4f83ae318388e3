#include "io/data/sequence_packer.hpp"

#include <random>

#include "messages/error.hpp"

namespace troupe::io {
namespace {

packed_sequence build_sequence(const std::vector<std::vector<int32_t>>& run, std::size_t a_segments,
                               const special_token_ids& specials) {
  packed_sequence sequence;
  sequence.tokens.push_back(specials.cls);
  for (std::size_t s = 0; s < a_segments; ++s)
    sequence.tokens.insert(sequence.tokens.end(), run[s].begin(), run[s].end());
  sequence.tokens.push_back(specials.sep);
  sequence.type_boundary = static_cast<uint16_t>(sequence.tokens.size());
  if (a_segments < run.size()) {
    for (std::size_t s = a_segments; s < run.size(); ++s)
      sequence.tokens.insert(sequence.tokens.end(), run[s].begin(), run[s].end());
    sequence.tokens.push_back(specials.sep);
  }
  return sequence;
}

}  // namespace

std::vector<packed_sequence> pack_document(const std::vector<std::vector<int32_t>>& segments,
                                           uint32_t max_seq_length, const special_token_ids& specials,
                                           uint64_t seed, uint64_t document_index) {
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
    std::size_t a_segments = 1;
    if (run.size() > 1) a_segments = std::uniform_int_distribution<std::size_t>(1, run.size() - 1)(generator);
    sequences.push_back(build_sequence(run, a_segments, specials));
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
