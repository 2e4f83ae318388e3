#pragma once
/// Splits a paragraph into sentence-sized pieces for segment packing.

#include <string>
#include <string_view>
#include <vector>

namespace troupe::io {

/// Splits after '.', '!' or '?' (optionally followed by closing quotes or brackets) when
/// whitespace follows. A piece longer than `max_piece_bytes` is cut at the last whitespace
/// before the limit (or at a UTF-8 character boundary when there is none), so a huge line
/// never becomes one huge unit of work. Pieces are trimmed; empty ones are dropped.
std::vector<std::string_view> split_sentences(std::string_view paragraph, std::size_t max_piece_bytes = 8192);

}  // namespace troupe::io
