#pragma once
/// UTF-8 decoding and encoding on top of utf8proc.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::io {

/// Decodes `text` into code points. Returns the byte offset of the first invalid sequence, or
/// std::nullopt when the whole text is valid UTF-8 (then `out` holds every code point).
std::optional<std::size_t> decode_utf8(std::string_view text, std::vector<char32_t>& out);

/// decode_utf8 or throw: troupe::error "`what`: invalid UTF-8 at byte N".
std::vector<char32_t> code_points_of(std::string_view text, const std::string& what);

/// Appends the UTF-8 encoding of `code_point` to `out`.
void append_utf8(std::string& out, char32_t code_point);

/// Encodes a run of code points.
std::string encode_utf8(const char32_t* begin, const char32_t* end);

/// Python's str.isspace(), what str.split() and strip() split on: Unicode whitespace (Zs, Zl,
/// Zp), \t..\r, the ASCII separators 0x1c..0x1f and U+0085.
bool python_space(char32_t c);

/// " ".join(text.split()) in Python: the words between python_space runs, joined by one space,
/// as UTF-8.
std::string join_python_words(const char32_t* begin, const char32_t* end);

}  // namespace troupe::io
