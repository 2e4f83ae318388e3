#include "io/checkpoint/safetensors_header.hpp"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "messages/error.hpp"

namespace troupe::io {
namespace {

using nlohmann::json;

}  // namespace

const safetensors_dtype_info* find_safetensors_dtype(const std::string& name) {
  for (const auto& info : safetensors_dtypes)
    if (name == info.name) return &info;
  return nullptr;
}

uint64_t safetensors_header_length(const std::byte* first_8_bytes, uint64_t file_size, const std::string& name) {
  if (file_size < 8) throw make_error(name, ": too short for a safetensors file (", file_size, " bytes)");
  uint64_t header_length = 0;
  std::memcpy(&header_length, first_8_bytes, 8);  // little-endian on every supported host
  if (header_length > max_safetensors_header_bytes || header_length > file_size - 8)
    throw make_error(name, ": safetensors header length ", header_length, " exceeds the file (", file_size, " bytes)");
  return header_length;
}

safetensors_header parse_safetensors_header(const std::byte* data, std::size_t size, const std::string& name) {
  return parse_safetensors_header_prefix(data, size, size, name);
}

safetensors_header parse_safetensors_header_prefix(const std::byte* data, std::size_t prefix_size, uint64_t size,
                                                   const std::string& name) {
  if (size < 8 || prefix_size < 8) throw make_error(name, ": too short for a safetensors file (", size, " bytes)");
  const uint64_t header_length = safetensors_header_length(data, size, name);
  if (header_length > prefix_size - 8) throw make_error(name, ": the header was not fully read");
  json header;
  try {
    header = json::parse(reinterpret_cast<const char*>(data) + 8,
                         reinterpret_cast<const char*>(data) + 8 + header_length);
  } catch (const json::exception& e) {
    throw make_error(name, ": safetensors header is not valid JSON: ", e.what());
  }
  if (!header.is_object()) throw make_error(name, ": safetensors header must be a JSON object");
  const uint64_t payload_size = size - 8 - header_length;

  safetensors_header result;
  result.payload_offset = 8 + header_length;
  for (const auto& [key, entry] : header.items()) {
    if (key == "__metadata__") {
      if (!entry.is_object()) throw make_error(name, ": __metadata__ must be an object of strings");
      for (const auto& [mkey, mvalue] : entry.items()) {
        if (!mvalue.is_string()) throw make_error(name, ": __metadata__.", mkey, " must be a string");
        result.metadata[mkey] = mvalue.get<std::string>();
      }
      continue;
    }
    const std::string where = name + ": tensor '" + key + "'";
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      throw make_error(where, ": expected {dtype, shape, data_offsets}");
    if (!entry["dtype"].is_string()) throw make_error(where, ": dtype must be a string");
    safetensors_entry tensor;
    tensor.name = key;
    tensor.dtype = entry["dtype"].get<std::string>();
    const auto* dtype = find_safetensors_dtype(tensor.dtype);
    if (dtype == nullptr) throw make_error(where, ": unknown dtype ", entry["dtype"].dump());
    tensor.element_bytes = dtype->bytes;
    const auto& shape_json = entry["shape"];
    const auto& offsets = entry["data_offsets"];
    if (!shape_json.is_array()) throw make_error(where, ": shape must be an array");
    uint64_t numel = 1;
    for (const auto& dim : shape_json) {
      if (!dim.is_number_unsigned()) throw make_error(where, ": shape entries must be non-negative integers");
      auto d = dim.get<uint64_t>();
      if (d != 0 && numel > (uint64_t{1} << 62) / d) throw make_error(where, ": shape is too large");
      numel *= d;
      tensor.shape.push_back(static_cast<int64_t>(d));
    }
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      throw make_error(where, ": data_offsets must be two non-negative integers");
    tensor.begin = offsets[0].get<uint64_t>();
    tensor.end = offsets[1].get<uint64_t>();
    if (tensor.begin > tensor.end || tensor.end > payload_size)
      throw make_error(where, ": data_offsets [", tensor.begin, ", ", tensor.end,
                       "] fall outside the data section of ", payload_size, " bytes");
    if (numel > (uint64_t{1} << 62) / tensor.element_bytes || numel * tensor.element_bytes != tensor.end - tensor.begin)
      throw make_error(where, ": ", numel, " elements of ", tensor.dtype, " need ", numel * tensor.element_bytes,
                       " bytes, data_offsets span ", tensor.end - tensor.begin);
    result.entries.push_back(std::move(tensor));
  }
  std::vector<const safetensors_entry*> by_offset;
  for (const auto& e : result.entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  uint64_t expected = 0;
  for (const auto* e : by_offset) {
    if (e->begin < expected) throw make_error(name, ": tensor '", e->name, "' overlaps the previous tensor's bytes");
    if (e->begin > expected) throw make_error(name, ": gap in the data section before tensor '", e->name, "'");
    expected = e->end;
  }
  if (expected != payload_size)
    throw make_error(name, ": data section has ", payload_size - expected, " bytes no tensor describes");
  return result;
}

}  // namespace troupe::io
