#pragma once
/// The safetensors format (HuggingFace): 8-byte little-endian header length, a JSON header
/// {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then raw little-endian data.

#include <filesystem>
#include <map>
#include <string>

#include "compute/named_tensors.hpp"
#include "io/os/file_util.hpp"

namespace troupe::io {

struct safetensors_content {
  compute::named_tensors tensors;  ///< in file order
  std::map<std::string, std::string> metadata;
};

/// Writes CPU or device tensors (copied to CPU, contiguous) atomically to `path`.
/// Returns the xxh64 of the file's bytes.
uint64_t write_safetensors(const std::filesystem::path& path, const compute::named_tensors& tensors,
                       const std::map<std::string, std::string>& metadata = {}, const write_progress& progress = {});

/// Reads and validates a file: header length within the file, JSON well-formed, known
/// dtypes, shapes whose byte size equals the offsets' span, offsets inside the data section,
/// no overlaps or gaps. Throws troupe::error naming the file and the problem; never reads out
/// of bounds.
safetensors_content read_safetensors(const std::filesystem::path& path);

/// Tensors a read may fill in place, by name: e.g. a trainer's parameters, so that resuming needs
/// neither fresh memory (the kernel zeroes every new page) nor a second copy into the model. A
/// target is used when it is a contiguous CPU tensor of the entry's dtype and shape; any other
/// entry gets a new tensor.
using tensor_targets = std::map<std::string, at::Tensor>;

/// Reads a file with large read() calls straight into the tensors' memory (`targets` where they
/// fit, else new tensors), hashing on the way; throws troupe::error naming the file when its
/// xxh64 is not `expected_xxh64` or it is invalid. On a throw, targets may hold partial data.
safetensors_content read_safetensors_verified(const std::filesystem::path& path, uint64_t expected_xxh64,
                                              const tensor_targets& targets = {});

/// The same checks on bytes already in memory (`name` is used in messages).
safetensors_content parse_safetensors(const std::byte* data, std::size_t size, const std::string& name);

}  // namespace troupe::io
