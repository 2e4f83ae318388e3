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

/// The element types troupe reads and writes, with their safetensors names and sizes: the one
/// table both this torch-free validator and the LibTorch reader (safetensors.cpp) use.
enum class safetensors_dtype { f64, f32, f16, bf16, i64, i32, i16, i8, u8, boolean };

struct safetensors_dtype_info {
  const char* name;
  std::size_t bytes;
  safetensors_dtype dtype;
};

inline constexpr safetensors_dtype_info safetensors_dtypes[] = {
    {"F64", 8, safetensors_dtype::f64}, {"F32", 4, safetensors_dtype::f32}, {"F16", 2, safetensors_dtype::f16},
    {"BF16", 2, safetensors_dtype::bf16}, {"I64", 8, safetensors_dtype::i64}, {"I32", 4, safetensors_dtype::i32},
    {"I16", 2, safetensors_dtype::i16}, {"I8", 1, safetensors_dtype::i8}, {"U8", 1, safetensors_dtype::u8},
    {"BOOL", 1, safetensors_dtype::boolean},
};

/// The table entry of a safetensors dtype name; nullptr when unknown.
const safetensors_dtype_info* find_safetensors_dtype(const std::string& name);

/// Headers longer than this are refused before anything is allocated for them (the format's
/// reference implementation uses the same 100 MB bound).
inline constexpr uint64_t max_safetensors_header_bytes = 100'000'000;

/// The header length stored in a file's first 8 bytes, checked against the file's size and the
/// bound above; throws troupe::error naming `name`.
uint64_t safetensors_header_length(const std::byte* first_8_bytes, uint64_t file_size, const std::string& name);

}  // namespace troupe::io
