#include "io/config/byte_count.hpp"

#include <limits>

#include "messages/error.hpp"

namespace troupe::io {

uint64_t parse_byte_count(const std::string& text, const std::string& what) {
  auto refuse = [&] {
    return make_error(what, ": expected a whole number of bytes with an optional unit (4096, 64K, 256M, 1G), got '",
                      text, "'");
  };
  std::size_t digits = 0;
  uint64_t value = 0;
  for (; digits < text.size() && text[digits] >= '0' && text[digits] <= '9'; ++digits) {
    const uint64_t digit = static_cast<uint64_t>(text[digits] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) throw refuse();
    value = value * 10 + digit;
  }
  const std::string unit = text.substr(digits);
  const int shift = unit.empty() || unit == "B" ? 0 : unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : -1;
  if (digits == 0 || shift < 0 || value == 0 || value > (std::numeric_limits<uint64_t>::max() >> shift))
    throw refuse();
  return value << shift;
}

}  // namespace troupe::io
