#include "io/checkpoint/safetensors.hpp"

#include <ATen/ATen.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <cstring>
#include <nlohmann/json.hpp>

#include "io/checkpoint/safetensors_header.hpp"
#include "io/os/file_util.hpp"
#include "io/os/mapped_file.hpp"
#include "io/os/unique_fd.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

using nlohmann::json;

at::ScalarType scalar_type(safetensors_dtype dtype) {
  switch (dtype) {
    case safetensors_dtype::f64: return at::kDouble;
    case safetensors_dtype::f32: return at::kFloat;
    case safetensors_dtype::f16: return at::kHalf;
    case safetensors_dtype::bf16: return at::kBFloat16;
    case safetensors_dtype::i64: return at::kLong;
    case safetensors_dtype::i32: return at::kInt;
    case safetensors_dtype::i16: return at::kShort;
    case safetensors_dtype::i8: return at::kChar;
    case safetensors_dtype::u8: return at::kByte;
    case safetensors_dtype::boolean: return at::kBool;
  }
  throw make_error("safetensors: unknown dtype");
}

at::ScalarType scalar_type_of(const std::string& name) {
  if (const auto* info = find_safetensors_dtype(name)) return scalar_type(info->dtype);
  throw make_error("safetensors: unsupported dtype ", name);
}

const char* dtype_name(at::ScalarType type) {
  for (const auto& info : safetensors_dtypes)
    if (scalar_type(info.dtype) == type) return info.name;
  throw make_error("safetensors: unsupported dtype ", c10::toString(type));
}

}  // namespace

uint64_t write_safetensors(const std::filesystem::path& path, const compute::named_tensors& tensors,
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
  return write_file_atomically(path, parts, progress);
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

namespace {

/// Faults fresh memory in before read() fills it: one populate call instead of a page fault per
/// 4 KiB inside the kernel's copy (measured 3–4x faster loads of large tensors). Best effort.
void prefault(void* address, std::size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  constexpr int populate_write = MADV_POPULATE_WRITE;
#else
  constexpr int populate_write = 23;  // Linux 5.14+
#endif
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(address) / page * page;
  const auto end = reinterpret_cast<uintptr_t>(address) + bytes;
  if (bytes >= (1u << 20)) ::madvise(reinterpret_cast<void*>(begin), end - begin, populate_write);
}

}  // namespace

namespace {

/// The target for `entry` when it fits (see tensor_targets), else a new tensor.
at::Tensor destination_for(const safetensors_entry& entry, const tensor_targets& targets) {
  const auto dtype = scalar_type_of(entry.dtype);
  auto found = targets.find(entry.name);
  if (found != targets.end()) {
    const at::Tensor& target = found->second;
    if (target.defined() && target.device().is_cpu() && target.is_contiguous() && target.scalar_type() == dtype &&
        target.sizes().vec() == entry.shape)
      return target;
  }
  return at::empty(entry.shape, at::TensorOptions().dtype(dtype));
}

}  // namespace

safetensors_content read_safetensors_verified(const std::filesystem::path& path, uint64_t expected_xxh64,
                                              const tensor_targets& targets) {
  const std::string name = path.string();
  const unique_fd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file.valid()) throw make_error(name, ": cannot open: ", std::strerror(errno));
  const int fd = file.get();
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  const uint64_t file_size = std::filesystem::file_size(path);
  auto read_exactly = [&](void* into, uint64_t bytes) { io::read_exactly(fd, into, bytes, name); };
  std::vector<std::byte> prefix(8);
  if (file_size < 8) throw make_error(name, ": too short for a safetensors file (", file_size, " bytes)");
  read_exactly(prefix.data(), 8);
  const uint64_t header_length = safetensors_header_length(prefix.data(), file_size, name);
  prefix.resize(8 + header_length);
  read_exactly(prefix.data() + 8, header_length);
  auto header = parse_safetensors_header_prefix(prefix.data(), prefix.size(), file_size, name);

  xxh64_stream hash;
  hash.update(prefix.data(), prefix.size());
  std::vector<const safetensors_entry*> by_offset;
  for (const auto& entry : header.entries) by_offset.push_back(&entry);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  std::map<std::string, at::Tensor> tensors;
  for (const auto* entry : by_offset) {  // contiguous and gap-free, checked by the header parser
    auto tensor = destination_for(*entry, targets);
    prefault(tensor.data_ptr(), entry->end - entry->begin);
    read_exactly(tensor.data_ptr(), entry->end - entry->begin);
    hash.update(tensor.data_ptr(), entry->end - entry->begin);
    tensors.emplace(entry->name, std::move(tensor));
  }
  if (hash.digest() != expected_xxh64) throw make_error(name, " fails its xxh64 checksum (corrupt)");
  safetensors_content content;
  content.metadata = std::move(header.metadata);
  for (const auto& entry : header.entries) content.tensors.emplace_back(entry.name, tensors.at(entry.name));
  return content;
}

safetensors_content read_safetensors(const std::filesystem::path& path) {
  mapped_file file(path);
  return parse_safetensors(file.data(), file.size(), path.string());
}

}  // namespace troupe::io
