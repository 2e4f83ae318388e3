#pragma once
/// Reading a corpus as documents, in parts that the tokenizing threads can take one batch at a
/// time (io/data/corpus_preparer.hpp). One thread reads: the files in the order of their paths,
/// each decompressed as it streams (io/data/compressed_lines.hpp), its lines cut into documents by
/// the corpus format. Memory stays bounded whatever the input: a document is held whole only up to
/// `hold_bytes` (so that its key, the hash of its text, is known before any of it is handed on);
/// past that its key is the hash of its first `hold_bytes` and the rest streams on in parts.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/data/compressed_lines.hpp"
#include "io/data/corpus_format.hpp"

namespace troupe::io {

/// One document's text, whole or a run of it, or a bad record met in the input.
struct text_part {
  std::size_t file = 0;            ///< index into document_reader::files()
  uint64_t line = 0;               ///< the line (1-based) its text starts on, or the bad record's
  std::vector<std::string> lines;  ///< text lines, without blank ones; JSON Lines: the record's line
  std::optional<uint64_t> key;     ///< the document's key, when the reader has it (not JSON Lines)
  bool first = true;               ///< the document's first part
  bool last = true;                ///< its last
  std::string problem;             ///< a bad record here (invalid UTF-8, a corrupt stream); no text then
};

struct document_reader_options {
  corpus_format format = corpus_format::file;
  std::optional<compression> codec;  ///< every file's; by extension when none
  std::size_t batch_bytes = std::size_t{1} << 20;  ///< text per batch (a unit of the threads' work)
  std::size_t hold_bytes = std::size_t{16} << 20;  ///< of a document, before its key is fixed
};

class document_reader {
 public:
  /// The files under `inputs` (files, and directories searched recursively, hidden entries and
  /// links to directories skipped), sorted by path so that the listing order makes no difference.
  /// Throws troupe::error naming an input that does not exist, or when there are no files.
  document_reader(const std::vector<std::filesystem::path>& inputs, document_reader_options options);
  ~document_reader();

  /// The next parts, about `batch_bytes` of text (more when one line is longer); empty at the end.
  std::vector<text_part> next_batch();

  const std::vector<std::filesystem::path>& files() const { return files_; }
  /// Bytes of the input files as on disk (compressed), in all and read so far.
  uint64_t total_bytes() const { return total_bytes_; }
  uint64_t bytes_read() const;

 private:
  /// Reads one line into the batch; false when every file is done.
  bool read_line(std::vector<text_part>& batch, std::size_t& batch_bytes);
  void take_text_line(std::string_view line, std::vector<text_part>& batch, std::size_t& batch_bytes);
  /// Hands on the held lines of the document being read (the whole document when `last`).
  void hand_on(bool last, std::vector<text_part>& batch, std::size_t& batch_bytes);
  void open_next_file();
  void end_file(std::vector<text_part>& batch, std::size_t& batch_bytes);

  document_reader_options options_;
  std::vector<std::filesystem::path> files_;
  std::vector<uint64_t> file_bytes_;  ///< each file's size
  uint64_t total_bytes_ = 0;
  uint64_t finished_bytes_ = 0;  ///< of the files done
  std::size_t next_file_ = 0;
  std::unique_ptr<compressed_lines> lines_;  ///< the file being read
  std::size_t file_ = 0;                     ///< its index
  // The document being read (the text formats).
  text_part held_;
  std::size_t held_bytes_ = 0;
  document_key key_;
  std::optional<uint64_t> fixed_key_;  ///< once the document outgrew hold_bytes
  bool handed_on_ = false;             ///< a part of it was handed on
  std::vector<char32_t> code_points_;  ///< scratch of the UTF-8 check
};

}  // namespace troupe::io
