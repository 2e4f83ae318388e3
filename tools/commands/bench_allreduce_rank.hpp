#pragma once
/// One rank of `troupe bench allreduce`: the measurement itself (bench_allreduce_rank.cpp).

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace troupe::tools {

struct allreduce_rank_options {
  std::string manifest;  ///< the local manifest the driver wrote
  std::string node;      ///< this rank's node name in it
  std::string bytes;     ///< message sizes, "4K,1M,64M"
  std::string out;       ///< rank 0 writes the JSON result here
  std::string wire = "fp32";  ///< how the floats cross the links: fp32, bf16 or fp16
};

/// "4K,1M,64M" → byte counts, each a whole number of floats; throws troupe::error naming --bytes.
std::vector<uint64_t> parse_allreduce_sizes(const std::string& list);

/// Where rank `rank` writes its link to its successor in ring `ring` (transport and device, as
/// UCX reports them) beside the result file `out`; the driver gathers them.
std::filesystem::path links_file(const std::filesystem::path& out, int rank, int ring);

/// Joins the job like a node and measures every size three ways (see bench_allreduce_rank.cpp);
/// throws troupe::error when any rank saw a wrong result.
void run_allreduce_rank(const allreduce_rank_options& options);

}  // namespace troupe::tools
