#pragma once
/// Packs a document's segments into BERT sequences [CLS] A [SEP] B [SEP].

#include <cstdint>
#include <random>
#include <vector>

#include "io/data/token_shards.hpp"
#include "io/text/tokenizer.hpp"

namespace troupe::io {

/// Packing, after BERT's create_pretraining_data without next-sentence prediction: segments
/// (sentences) are gathered in order until one more would overflow `max_seq_length - 3`
/// tokens; the gathered run is cut at a segment boundary chosen by a generator seeded from
/// (seed, document index) into A and B. A segment longer than the budget is split into
/// budget-sized pieces first. No token of the document is dropped. A document streams through
/// it segment by segment: it holds one sequence's worth of tokens at most.
///
/// With `sentence_order` (ALBERT's sentence-order prediction, `prepare --task sop`): a run of one
/// segment is cut at a random token instead, so that A and B are both there (a one-token run
/// stays A alone), and with probability 1/2 (the same generator) B comes first: label 1
/// (swapped), else 0. A and B are always consecutive text of one document.
class document_packer {
 public:
  /// `stream` picks the generator with `seed` (`troupe prepare` passes the document's key,
  /// io/data/corpus_format.hpp, so a document packs the same wherever it is in the corpus).
  document_packer(uint32_t max_seq_length, const special_token_ids& specials, uint64_t seed, uint64_t stream,
                  bool sentence_order = false);
  /// Takes the document's next segment; appends the sequences it completes to `out`.
  void add(const std::vector<int32_t>& segment, std::vector<packed_sequence>& out);
  /// Ends the document: appends its last sequence, if any.
  void finish(std::vector<packed_sequence>& out);

 private:
  void add_piece(std::vector<int32_t> piece, std::vector<packed_sequence>& out);
  void emit(std::vector<packed_sequence>& out);

  std::size_t budget_;
  special_token_ids specials_;
  bool sentence_order_;
  std::mt19937_64 generator_;
  std::vector<std::vector<int32_t>> run_;
  std::size_t run_tokens_ = 0;
};

/// A whole document at once (document_packer with `document_index` as its stream).
std::vector<packed_sequence> pack_document(const std::vector<std::vector<int32_t>>& segments,
                                           uint32_t max_seq_length, const special_token_ids& specials,
                                           uint64_t seed, uint64_t document_index, bool sentence_order = false);

}  // namespace troupe::io
