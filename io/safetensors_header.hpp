#pragma once
/// Validation of a safetensors file's header, independent of any tensor library (so it can be
/// fuzzed on its own).

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace troupe::io {

/// One tensor the header describes; its bytes are payload[begin, end).
struct safetensors_entry {
  std::string name;
  std::string dtype;             ///< "F32", "BF16", "I64", ...
  std::size_t element_bytes = 0;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct safetensors_header {
  std::vector<safetensors_entry> entries;  ///< in header order
  std::map<std::string, std::string> metadata;
  std::size_t payload_offset = 0;          ///< 8 + header length
};

/// Checks header length within the file (and ≤ 100 MB), JSON well-formed, known dtypes, shapes
/// whose byte size equals the offsets' span, offsets inside the data section, and no overlaps
/// or gaps. Throws troupe::error naming `name` and the problem; reads nothing out of bounds.
safetensors_header parse_safetensors_header(const std::byte* data, std::size_t size, const std::string& name);

/// The same checks when only the file's first `prefix_size` bytes are at hand (they must hold
/// the 8-byte length and the header) and the file has `file_size` bytes in all.
safetensors_header parse_safetensors_header_prefix(const std::byte* prefix, std::size_t prefix_size,
                                                   uint64_t file_size, const std::string& name);

/// Bytes per element of a safetensors dtype, 0 when unknown.
std::size_t safetensors_dtype_bytes(const std::string& dtype);

}  // namespace troupe::io
