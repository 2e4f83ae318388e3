#pragma once
/// `troupe bench ckpt`: checkpoint write throughput next to dd, training stall, resume time.

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace troupe::tools {

/// Stall, write (next to dd), resume (next to reading the files) for a `bytes` state in `dir`,
/// `rounds` times side by side; see bench_ckpt.cpp.
nlohmann::json bench_checkpoint(uint64_t bytes, const std::filesystem::path& dir, int rounds);

}  // namespace troupe::tools
