#include "io/safetensors.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "compute/error.hpp"
#include "io/file_util.hpp"
#include "io/mapped_file.hpp"

namespace troupe::io {
namespace {

using nlohmann::json;

constexpr uint64_t max_header_bytes = 100'000'000;

struct dtype_entry {
  const char* name;
  at::ScalarType type;
  uint64_t bytes;
};

constexpr dtype_entry dtypes[] = {
    {"F64", at::kDouble, 8}, {"F32", at::kFloat, 4}, {"F16", at::kHalf, 2}, {"BF16", at::kBFloat16, 2},
    {"I64", at::kLong, 8},   {"I32", at::kInt, 4},   {"I16", at::kShort, 2}, {"I8", at::kChar, 1},
    {"U8", at::kByte, 1},    {"BOOL", at::kBool, 1},
};

const dtype_entry* find_dtype(const std::string& name) {
  for (const auto& entry : dtypes)
    if (name == entry.name) return &entry;
  return nullptr;
}

const dtype_entry& find_dtype(at::ScalarType type) {
  for (const auto& entry : dtypes)
    if (entry.type == type) return entry;
  throw make_error("safetensors: unsupported dtype ", c10::toString(type));
}

}  // namespace

void write_safetensors(const std::filesystem::path& path, const compute::named_tensors& tensors,
                       const std::map<std::string, std::string>& metadata, const write_progress& progress) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> contiguous;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    auto cpu = tensor.detach().to(at::kCPU).contiguous();
    const auto& dtype = find_dtype(cpu.scalar_type());
    const uint64_t bytes = static_cast<uint64_t>(cpu.numel()) * dtype.bytes;
    header[name] = {{"dtype", dtype.name}, {"shape", cpu.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contiguous.push_back(std::move(cpu));
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  const uint64_t header_length = header_text.size();  // little-endian on every supported host
  std::vector<byte_span> parts;
  parts.push_back({reinterpret_cast<const std::byte*>(&header_length), 8});
  parts.push_back({reinterpret_cast<const std::byte*>(header_text.data()), header_text.size()});
  for (const auto& t : contiguous)
    parts.push_back({static_cast<const std::byte*>(t.data_ptr()), static_cast<std::size_t>(t.nbytes())});
  write_file_atomically(path, parts, progress);
}

safetensors_content parse_safetensors(const std::byte* data, std::size_t size, const std::string& name) {
  if (size < 8) throw make_error(name, ": too short for a safetensors file (", size, " bytes)");
  uint64_t header_length = 0;
  std::memcpy(&header_length, data, 8);
  if (header_length > max_header_bytes || header_length > size - 8)
    throw make_error(name, ": safetensors header length ", header_length, " exceeds the file (", size, " bytes)");
  json header;
  try {
    header = json::parse(reinterpret_cast<const char*>(data) + 8,
                         reinterpret_cast<const char*>(data) + 8 + header_length);
  } catch (const json::parse_error& e) {
    throw make_error(name, ": safetensors header is not valid JSON: ", e.what());
  }
  if (!header.is_object()) throw make_error(name, ": safetensors header must be a JSON object");
  const std::byte* payload = data + 8 + header_length;
  const uint64_t payload_size = size - 8 - header_length;

  safetensors_content content;
  struct range {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<range> ranges;
  for (const auto& [key, entry] : header.items()) {
    if (key == "__metadata__") {
      if (!entry.is_object()) throw make_error(name, ": __metadata__ must be an object of strings");
      for (const auto& [mkey, mvalue] : entry.items()) {
        if (!mvalue.is_string()) throw make_error(name, ": __metadata__.", mkey, " must be a string");
        content.metadata[mkey] = mvalue.get<std::string>();
      }
      continue;
    }
    const std::string where = name + ": tensor '" + key + "'";
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      throw make_error(where, ": expected {dtype, shape, data_offsets}");
    if (!entry["dtype"].is_string()) throw make_error(where, ": dtype must be a string");
    const dtype_entry* dtype = find_dtype(entry["dtype"].get<std::string>());
    if (dtype == nullptr) throw make_error(where, ": unknown dtype ", entry["dtype"].dump());
    const auto& shape_json = entry["shape"];
    const auto& offsets = entry["data_offsets"];
    if (!shape_json.is_array()) throw make_error(where, ": shape must be an array");
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    for (const auto& dim : shape_json) {
      if (!dim.is_number_unsigned()) throw make_error(where, ": shape entries must be non-negative integers");
      auto d = dim.get<uint64_t>();
      if (d != 0 && numel > (uint64_t{1} << 62) / d) throw make_error(where, ": shape is too large");
      numel *= d;
      shape.push_back(static_cast<int64_t>(d));
    }
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      throw make_error(where, ": data_offsets must be two non-negative integers");
    const auto begin = offsets[0].get<uint64_t>();
    const auto end = offsets[1].get<uint64_t>();
    if (begin > end || end > payload_size)
      throw make_error(where, ": data_offsets [", begin, ", ", end, "] fall outside the data section of ",
                       payload_size, " bytes");
    if (numel > (uint64_t{1} << 62) / dtype->bytes || numel * dtype->bytes != end - begin)
      throw make_error(where, ": ", numel, " elements of ", dtype->name, " need ", numel * dtype->bytes,
                       " bytes, data_offsets span ", end - begin);
    ranges.push_back({begin, end, key});
    auto tensor = at::empty(shape, at::TensorOptions().dtype(dtype->type));
    if (end > begin) std::memcpy(tensor.data_ptr(), payload + begin, end - begin);
    content.tensors.emplace_back(key, std::move(tensor));
  }
  std::sort(ranges.begin(), ranges.end(), [](const range& a, const range& b) { return a.begin < b.begin; });
  uint64_t expected = 0;
  for (const auto& r : ranges) {
    if (r.begin < expected) throw make_error(name, ": tensor '", r.name, "' overlaps the previous tensor's bytes");
    if (r.begin > expected) throw make_error(name, ": gap in the data section before tensor '", r.name, "'");
    expected = r.end;
  }
  if (expected != payload_size)
    throw make_error(name, ": data section has ", payload_size - expected, " bytes no tensor describes");
  return content;
}

safetensors_content read_safetensors(const std::filesystem::path& path) {
  mapped_file file(path);
  return parse_safetensors(file.data(), file.size(), path.string());
}

}  // namespace troupe::io
