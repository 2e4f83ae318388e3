#include "io/text/sentence_splitter.hpp"

namespace troupe::io {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

bool is_closing(char c) { return c == '"' || c == '\'' || c == ')' || c == ']'; }

// Moves `cut` back onto the start of a UTF-8 character.
std::size_t character_boundary(std::string_view text, std::size_t cut) {
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return cut;
}

void push_bounded(std::vector<std::string_view>& pieces, std::string_view piece, std::size_t max_bytes) {
  piece = trim(piece);
  while (piece.size() > max_bytes) {
    std::size_t cut = piece.find_last_of(" \t", max_bytes);
    if (cut == std::string_view::npos || cut == 0) cut = character_boundary(piece, max_bytes);
    if (cut == 0) cut = max_bytes;
    pieces.push_back(trim(piece.substr(0, cut)));
    piece = trim(piece.substr(cut));
  }
  if (!piece.empty()) pieces.push_back(piece);
}

}  // namespace

std::vector<std::string_view> split_sentences(std::string_view paragraph, std::size_t max_piece_bytes) {
  std::vector<std::string_view> pieces;
  std::size_t start = 0;
  for (std::size_t i = 0; i < paragraph.size(); ++i) {
    char c = paragraph[i];
    if (c != '.' && c != '!' && c != '?') continue;
    std::size_t end = i + 1;
    while (end < paragraph.size() && is_closing(paragraph[end])) ++end;
    if (end < paragraph.size() && !is_space(paragraph[end])) continue;
    push_bounded(pieces, paragraph.substr(start, end - start), max_piece_bytes);
    start = end;
    i = end;
  }
  if (start < paragraph.size()) push_bounded(pieces, paragraph.substr(start), max_piece_bytes);
  return pieces;
}

}  // namespace troupe::io
