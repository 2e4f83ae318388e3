#include "tools/commands/bench_allreduce.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "actors/node_session.hpp"
#include "cluster/launcher.hpp"
#include "compute/error.hpp"
#include "compute/ring_schedule.hpp"
#include "io/file_util.hpp"
#include "io/ring_allreduce.hpp"
#include "io/shared_region.hpp"
#include "tools/commands/bench_ckpt.hpp"

namespace troupe::tools {
namespace {

using clock = std::chrono::steady_clock;
using nlohmann::json;

struct allreduce_arguments {
  int world = 2;
  std::string bytes = "4K,1M,16M,64M";
  int rings = 1;
  std::string chunk = "1M";
  bool shared_memory = true;
  bool json_output = false;
  // Rank side (set by the driver).
  std::string manifest;
  std::string node;
  std::string out;
};

std::vector<uint64_t> parse_sizes(const std::string& list) {
  std::vector<uint64_t> sizes;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    const auto bytes = parse_byte_count(item);
    if (bytes % sizeof(float) != 0) throw make_error("--bytes: ", item, " is not a whole number of floats");
    sizes.push_back(bytes);
  }
  if (sizes.empty()) throw error("--bytes: expected a comma-separated list such as 4K,1M,64M");
  return sizes;
}

/// One rank: joins like a node, then for each size times `iterations` allreduces of a float
/// buffer split over the rings (one thread per ring, as the reducers run), checks one more
/// against the closed form, and — on rank 0 — writes the results.
void run_rank(const allreduce_arguments& args) {
  actors::node_identity node;
  node.manifest = cluster::load_manifest(args.manifest);
  node.name = args.node;
  const auto sizes = parse_sizes(args.bytes);
  actors::cluster_membership membership(node, io::xxh64(args.bytes.data(), args.bytes.size()));
  const auto& role = membership.role();
  const int rank = role.first_rank;
  const int rings = static_cast<int>(role.ring_orders.size());
  // The buffer lives in a shared region (as a worker's gradient does), which the rings use
  // when the manifest allows and every rank can map its neighbours'.
  const uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
  io::shared_region region(largest, "bench allreduce buffer");
  std::vector<std::unique_ptr<io::ring_allreduce>> ring;
  for (int r = 0; r < rings; ++r) {
    io::ring_settings settings;
    settings.order = role.ring_orders[static_cast<std::size_t>(r)];
    settings.ring_index = r;
    settings.chunk_bytes = role.chunk_bytes;
    settings.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(role.collective_timeout);
    ring.push_back(std::make_unique<io::ring_allreduce>(*role.transports[0][static_cast<std::size_t>(r)], rank, settings));
    if (role.shared_memory) ring.back()->share_memory(region);
  }
  uint64_t sequence = 0;
  // All rings at once on their slices, each on its own thread (as the reducer actors do).
  auto allreduce = [&](float* data, std::size_t count) {
    const uint64_t s = sequence++;
    if (rings == 1) return ring[0]->sum(data, count, s);
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> failures(static_cast<std::size_t>(rings));
    for (int r = 0; r < rings; ++r)
      threads.emplace_back([&, r] {
        try {
          const auto slice = compute::ring_slice(count, rings, r);
          ring[static_cast<std::size_t>(r)]->sum(data + slice.begin, slice.size(), s);
        } catch (...) {
          failures[static_cast<std::size_t>(r)] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    for (auto& f : failures)
      if (f) std::rethrow_exception(f);
  };

  json results = json::array();
  const double world = role.world;
  for (const auto bytes : sizes) {
    const std::size_t count = bytes / sizeof(float);
    float* data = reinterpret_cast<float*>(region.data());
    const int iterations = bytes >= (16u << 20) ? 10 : bytes >= (1u << 20) ? 50 : 1000;
    std::fill(data, data + count, 0.0f);
    for (int warm = 0; warm < std::max(3, iterations / 5); ++warm) allreduce(data, count);
    const auto start = clock::now();
    for (int i = 0; i < iterations; ++i) allreduce(data, count);
    const double seconds = std::chrono::duration<double>(clock::now() - start).count() / iterations;
    // Correctness: rank r contributes (r+1)·(i mod 13); the sum is W(W+1)/2·(i mod 13), exact in float.
    for (std::size_t i = 0; i < count; ++i) data[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 13));
    allreduce(data, count);
    std::vector<float> wrong(1, 0.0f);
    const double triangle = world * (world + 1) / 2;
    for (std::size_t i = 0; i < count; ++i)
      if (data[i] != static_cast<float>(triangle * static_cast<double>(i % 13))) wrong[0] += 1;
    allreduce(wrong.data(), 1);  // every rank learns whether any rank saw a wrong element
    const double algbw = static_cast<double>(bytes) / seconds / 1e9;
    results.push_back({{"bytes", bytes},
                       {"time_us", seconds * 1e6},
                       {"algbw_GBs", algbw},
                       {"busbw_GBs", algbw * 2 * (world - 1) / world},
                       {"iterations", iterations},
                       {"correct", wrong[0] == 0.0f}});
  }
  const bool shared = std::all_of(ring.begin(), ring.end(), [](const auto& r) { return r->uses_shared_memory(); });
  ring.clear();
  membership.finish();
  if (rank == 0) {
    json out = {{"benchmark", "allreduce"}, {"world", role.world}, {"rings", rings},
                {"chunk_bytes", role.chunk_bytes}, {"transport", shared ? "shared memory" : "ucx"},
                {"results", results}};
    io::write_file_atomically(args.out, out.dump());
  }
}

/// The driver: a local manifest with `world` single-worker nodes, one rank process each.
void run_driver(const allreduce_arguments& args) {
  parse_sizes(args.bytes);
  if (args.world < 1 || args.world > 64) throw error("--world: expected 1..64");
  if (args.rings < 1 || args.rings > 16) throw error("--rings: expected 1..16");
  const auto chunk = parse_byte_count(args.chunk);
  const auto scratch = std::filesystem::temp_directory_path() / ("troupe-bench-allreduce-" + std::to_string(::getpid()));
  std::filesystem::create_directories(scratch);
  struct cleanup {
    std::filesystem::path dir;
    ~cleanup() { std::filesystem::remove_all(dir); }
  } remove_scratch{scratch};
  json manifest = {{"head", {{"host", "127.0.0.1"}, {"port", free_local_port()}}},
                   {"rings", {{"count", args.rings}, {"chunk_bytes", chunk}, {"shared_memory", args.shared_memory}}},
                   {"timeouts", {{"join_s", 60}, {"collective_s", 60}}},
                   {"oversubscribe", true}};
  for (int r = 0; r < args.world; ++r)
    manifest["nodes"].push_back({{"name", "rank" + std::to_string(r)}, {"host", "127.0.0.1"}, {"workers", 1}});
  io::write_file_atomically(scratch / "manifest.json", manifest.dump(2));
  const auto binary = cluster::current_executable().string();
  std::vector<cluster::node_command> commands;
  for (int r = 0; r < args.world; ++r)
    commands.push_back({"rank" + std::to_string(r), cluster::launch_method::local,
                        {binary, "bench", "allreduce-rank", "--manifest", (scratch / "manifest.json").string(), "--node",
                         "rank" + std::to_string(r), "--bytes", args.bytes, "--out", (scratch / "result.json").string()}});
  if (cluster::run_nodes(commands, std::chrono::seconds(90)) != 0) throw error("bench allreduce: a rank failed");
  const auto result = json::parse(io::read_whole_file(scratch / "result.json"));
  std::printf("%s\n", args.json_output ? result.dump().c_str() : result.dump(2).c_str());
}

}  // namespace

int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) ::close(fd);
    throw error("cannot find a free TCP port on 127.0.0.1");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

void add_bench_allreduce(CLI::App* bench) {
  auto args = std::make_shared<allreduce_arguments>();
  auto* driver = bench->add_subcommand("allreduce", "ring allreduce over UCX, one process per rank (nccl-tests numbers)");
  driver->add_option("--world", args->world, "ranks (processes on this host)")->capture_default_str();
  driver->add_option("--bytes", args->bytes, "message sizes, comma-separated (4K,1M,64M)")->capture_default_str();
  driver->add_option("--rings", args->rings, "concurrent rings")->capture_default_str();
  driver->add_option("--chunk-bytes", args->chunk, "pipeline chunk of the ring")->capture_default_str();
  driver->add_option("--shared-memory", args->shared_memory,
                     "sums read neighbours' buffers in place on this host (false: every byte over UCX)")
      ->capture_default_str();
  driver->add_flag("--json", args->json_output, "print one JSON line");
  driver->callback([args] { run_driver(*args); });

  auto* rank = bench->add_subcommand("allreduce-rank", "one rank of bench allreduce (started by it)");
  rank->group("");  // hidden from --help
  rank->add_option("--manifest", args->manifest)->required();
  rank->add_option("--node", args->node)->required();
  rank->add_option("--bytes", args->bytes)->required();
  rank->add_option("--out", args->out)->required();
  rank->callback([args] {
    try {
      run_rank(*args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "troupe: error: %s: %s\n", args->node.c_str(), e.what());
      std::fflush(stderr);
      std::_Exit(1);
    }
  });
}

}  // namespace troupe::tools
