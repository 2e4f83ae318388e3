#pragma once
/// A corpus file read line by line: plain, gzip (zlib) or Zstandard (libzstd), decompressed as it
/// streams, so memory does not grow with the file. Concatenated gzip members and zstd frames (what
/// `cat a.gz b.gz` and `pzstd` write) are read as one stream.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::io {

enum class compression { none, gzip, zstd };

/// By the file name: ".gz" gzip, ".zst" or ".zstd" Zstandard, anything else none.
compression compression_of(const std::filesystem::path& file);
/// `troupe prepare --compression NAME`: "none", "gzip" or "zstd" ("auto" is compression_of, the
/// caller's); std::nullopt for any other name.
std::optional<compression> compression_named(std::string_view name);

class compressed_lines {
 public:
  /// The longest line read: a longer one is an error naming the file and line (a file without
  /// line breaks would otherwise have to be held whole).
  static constexpr std::size_t max_line_bytes = std::size_t{64} << 20;

  /// Opens `file`; throws troupe::error naming it when it cannot be opened.
  compressed_lines(std::filesystem::path file, compression codec);
  ~compressed_lines();
  compressed_lines(const compressed_lines&) = delete;
  compressed_lines& operator=(const compressed_lines&) = delete;

  /// The next line, without its "\n" or "\r\n"; false at the end of the file. Throws
  /// troupe::error naming the file and the line reached when the compressed stream is corrupt or
  /// ends early (a truncated download), or when a line is longer than max_line_bytes. The view is
  /// valid until the next call.
  bool next(std::string_view& line);
  /// The number of the line next() returned last (1-based).
  uint64_t line_number() const { return line_number_; }
  /// Bytes of the file (compressed, as on disk) consumed so far.
  uint64_t file_bytes_read() const { return file_bytes_read_; }

 private:
  /// Appends more text to text_; false when the file is done.
  bool read_more();
  [[noreturn]] void fail(const std::string& what) const;

  std::filesystem::path file_;
  compression codec_;
  std::FILE* stream_ = nullptr;
  struct decoder;
  std::unique_ptr<decoder> decoder_;
  std::string input_;       ///< compressed bytes read, not yet decoded
  std::size_t input_at_ = 0;
  bool input_ended_ = false;
  std::string text_;        ///< decoded text; lines are cut from text_at_
  std::size_t text_at_ = 0;
  uint64_t line_number_ = 0;
  uint64_t file_bytes_read_ = 0;
};

}  // namespace troupe::io
