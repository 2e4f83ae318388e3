#pragma once
/// Packs a document's segments into BERT sequences [CLS] A [SEP] B [SEP].

#include <cstdint>
#include <vector>

#include "io/data/token_shards.hpp"
#include "io/text/tokenizer.hpp"

namespace troupe::io {

/// Packing, after BERT's create_pretraining_data without next-sentence prediction: segments
/// (sentences) are gathered in order until one more would overflow `max_seq_length - 3`
/// tokens; the gathered run is cut at a segment boundary chosen by a generator seeded from
/// (seed, document index) into A and B. A segment longer than the budget is split into
/// budget-sized pieces first. No token of the document is dropped.
///
/// With `sentence_order` (ALBERT's sentence-order prediction, `prepare --task sop`): a run of one
/// segment is cut at a random token instead, so that A and B are both there (a one-token run
/// stays A alone), and with probability 1/2 (the same generator) B comes first: label 1
/// (swapped), else 0. A and B are always consecutive text of one document.
std::vector<packed_sequence> pack_document(const std::vector<std::vector<int32_t>>& segments,
                                           uint32_t max_seq_length, const special_token_ids& specials,
                                           uint64_t seed, uint64_t document_index, bool sentence_order = false);

}  // namespace troupe::io
