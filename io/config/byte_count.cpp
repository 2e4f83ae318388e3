#include "io/config/byte_count.hpp"

#include "messages/error.hpp"

namespace troupe::io {

uint64_t parse_byte_count(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw make_error(what, ": expected a size like 256M or 1G, got '", text, "'");
  }
  const std::string unit = text.substr(used);
  double scale = unit.empty() || unit == "B" ? 1 : unit == "K" ? 1024.0 : unit == "M" ? 1048576.0
                 : unit == "G" ? 1073741824.0 : -1;
  if (scale < 0 || value <= 0) throw make_error(what, ": expected a size like 256M or 1G, got '", text, "'");
  return static_cast<uint64_t>(value * scale);
}

}  // namespace troupe::io
