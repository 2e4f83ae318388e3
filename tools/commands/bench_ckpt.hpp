#pragma once
/// `troupe bench ckpt`: checkpoint write throughput, training stall and resume time.

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace troupe::tools {

/// "256M", "1G", "4096" → bytes; throws troupe::error naming --bytes.
uint64_t parse_byte_count(const std::string& text);
nlohmann::json bench_checkpoint(uint64_t bytes, const std::filesystem::path& dir);

}  // namespace troupe::tools
