#include "io/safetensors.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "compute/error.hpp"
#include "io/file_util.hpp"
#include "io/mapped_file.hpp"
#include "io/safetensors_header.hpp"

namespace troupe::io {
namespace {

using nlohmann::json;

struct dtype_entry {
  const char* name;
  at::ScalarType type;
};

constexpr dtype_entry dtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
    {"I32", at::kInt},    {"I16", at::kShort}, {"I8", at::kChar},  {"U8", at::kByte},       {"BOOL", at::kBool},
};

at::ScalarType scalar_type_of(const std::string& name) {
  for (const auto& entry : dtypes)
    if (name == entry.name) return entry.type;
  throw make_error("safetensors: unsupported dtype ", name);
}

const char* dtype_name(at::ScalarType type) {
  for (const auto& entry : dtypes)
    if (entry.type == type) return entry.name;
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
    const uint64_t bytes = static_cast<uint64_t>(cpu.nbytes());
    header[name] = {{"dtype", dtype_name(cpu.scalar_type())}, {"shape", cpu.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
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
  auto header = parse_safetensors_header(data, size, name);
  safetensors_content content;
  content.metadata = std::move(header.metadata);
  for (const auto& entry : header.entries) {
    auto tensor = at::empty(entry.shape, at::TensorOptions().dtype(scalar_type_of(entry.dtype)));
    if (entry.end > entry.begin)
      std::memcpy(tensor.data_ptr(), data + header.payload_offset + entry.begin, entry.end - entry.begin);
    content.tensors.emplace_back(entry.name, std::move(tensor));
  }
  return content;
}

safetensors_content read_safetensors(const std::filesystem::path& path) {
  mapped_file file(path);
  return parse_safetensors(file.data(), file.size(), path.string());
}

}  // namespace troupe::io
