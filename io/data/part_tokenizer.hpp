#pragma once
/// What a tokenizing thread of `troupe prepare` does with a batch of the reader's parts
/// (io/data/document_reader.hpp): a JSON line parsed for its text (and the text's key), every line
/// cut into sentences (io/text/sentence_splitter.hpp), every sentence encoded. Batches are
/// independent, so any number of threads give the same results.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "io/data/corpus_format.hpp"
#include "io/data/document_reader.hpp"
#include "io/text/tokenizer.hpp"

namespace troupe::io {

struct part_text_options {
  corpus_format format = corpus_format::file;
  std::vector<std::string> field_path;  ///< JSON Lines: jsonl_field_path(field_name)
  std::string field_name = "text";
};

/// Calls `sentence` with every sentence of `part`'s text, in order. Returns the part's key (a JSON
/// line's is computed here), or a problem: the part's own, or the JSON line's (then no sentence).
struct part_text {
  uint64_t key = 0;
  std::string problem;
};
part_text visit_sentences(const text_part& part, const part_text_options& options,
                          const std::function<void(std::string_view)>& sentence);

/// One part as token ids.
struct tokenized_part {
  std::size_t file = 0;
  uint64_t line = 0;
  uint64_t key = 0;
  bool first = true;
  bool last = true;
  std::vector<std::vector<int32_t>> segments;  ///< each sentence's ids (sentences without any left out)
  std::string problem;                         ///< a bad record: no segments
};

std::vector<tokenized_part> tokenize_parts(const std::vector<text_part>& parts, const tokenizer& tokens,
                                           const part_text_options& options);

}  // namespace troupe::io
