#pragma once
/// The forms a pretraining corpus comes in (docs/data.md#input-formats), and what makes a document
/// the same document whatever form it came in: its key.

#ifndef XXH_STATIC_LINKING_ONLY
#define XXH_STATIC_LINKING_ONLY  // XXH64_state_t by value
#endif
#include <xxhash.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::io {

/// How a file's lines become documents.
enum class corpus_format {
  file,        ///< "file": the whole file is one document
  blank_line,  ///< "bert": BERT's create_pretraining_data input, a blank line between documents
  jsonl,       ///< "jsonl": JSON Lines, one document per line, its text in a named field
};

/// `--format NAME`: "file", "bert" or "jsonl"; std::nullopt for any other name.
std::optional<corpus_format> corpus_format_named(std::string_view name);

/// Whether a line holds nothing but ASCII whitespace (a document break in the "bert" format, and
/// no paragraph in any format).
bool blank_line(std::string_view line);

/// Calls `line` with each line of `text`, cut at "\n" (the last one also without a "\n" after it;
/// a "\r" before the "\n" is left in the line).
void for_each_line(std::string_view text, const std::function<void(std::string_view)>& line);

/// A document's key: the xxh64 of its non-blank lines, each followed by "\n", fed line by line.
/// The same text gives the same key in every format (a JSON string's "\n" ends a line), and
/// renaming or re-sharding the files changes nothing. The validation split and the duplicate
/// filter go by it, and it seeds the document's packing (io/data/sequence_packer.hpp).
class document_key {
 public:
  document_key() { XXH64_reset(&state_, 0); }
  /// Adds one line (without its line break); blank lines are skipped.
  void add_line(std::string_view line);
  /// Adds a text of several lines, cut at "\n" (a trailing "\r" on a line is dropped).
  void add_text(std::string_view text);
  uint64_t value() const { return XXH64_digest(&state_); }
  /// Text bytes added so far.
  uint64_t bytes() const { return bytes_; }

 private:
  XXH64_state_t state_{};
  uint64_t bytes_ = 0;
};

/// `--jsonl-field a.b.c` as its keys ("text" → {"text"}); empty keys are refused with a
/// troupe::error naming the flag.
std::vector<std::string> jsonl_field_path(const std::string& field);

/// One JSON line's text at `field_path`, or why it has none.
struct jsonl_record {
  std::string text;
  std::string problem;  ///< empty when `text` is the record's
};

/// Parses `line` as a JSON object and takes the string at `field_path` (`field_name` is how the
/// user wrote it, for the message). Problems: not valid JSON (including invalid UTF-8), not an
/// object, a missing key, a value that is not a string.
jsonl_record jsonl_text(std::string_view line, const std::vector<std::string>& field_path,
                        const std::string& field_name);

}  // namespace troupe::io
