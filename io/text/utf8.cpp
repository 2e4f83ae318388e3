#include "io/text/utf8.hpp"

#include "messages/error.hpp"

#include <utf8proc.h>

namespace troupe::io {

std::optional<std::size_t> decode_utf8(std::string_view text, std::vector<char32_t>& out) {
  out.clear();
  out.reserve(text.size());
  auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  std::size_t offset = 0;
  while (offset < text.size()) {
    utf8proc_int32_t code_point = 0;
    auto consumed = utf8proc_iterate(bytes + offset, static_cast<utf8proc_ssize_t>(text.size() - offset),
                                     &code_point);
    if (consumed <= 0 || code_point < 0) return offset;
    out.push_back(static_cast<char32_t>(code_point));
    offset += static_cast<std::size_t>(consumed);
  }
  return std::nullopt;
}

std::vector<char32_t> code_points_of(std::string_view text, const std::string& what) {
  std::vector<char32_t> out;
  if (auto bad = decode_utf8(text, out)) throw make_error(what, ": invalid UTF-8 at byte ", *bad);
  return out;
}

void append_utf8(std::string& out, char32_t code_point) {
  utf8proc_uint8_t buffer[4];
  auto length = utf8proc_encode_char(static_cast<utf8proc_int32_t>(code_point), buffer);
  out.append(reinterpret_cast<const char*>(buffer), static_cast<std::size_t>(length));
}

std::string encode_utf8(const char32_t* begin, const char32_t* end) {
  std::string out;
  out.reserve(static_cast<std::size_t>(end - begin));
  for (auto* it = begin; it != end; ++it) append_utf8(out, *it);
  return out;
}

bool python_space(char32_t c) {
  if (c == U' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85) return true;
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return category == UTF8PROC_CATEGORY_ZS || category == UTF8PROC_CATEGORY_ZL || category == UTF8PROC_CATEGORY_ZP;
}

std::string join_python_words(const char32_t* begin, const char32_t* end) {
  std::string out;
  bool pending_space = false;
  for (const char32_t* it = begin; it != end; ++it) {
    if (python_space(*it)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    append_utf8(out, *it);
  }
  return out;
}

}  // namespace troupe::io
