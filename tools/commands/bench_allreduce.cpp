#include "tools/commands/bench_allreduce.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "cluster/launcher.hpp"
#include "io/comm/ring_schedule.hpp"
#include "io/config/byte_count.hpp"
#include "io/os/child_process.hpp"
#include "io/os/file_util.hpp"
#include "io/os/local_port.hpp"
#include "io/os/scratch_directory.hpp"
#include "messages/error.hpp"
#include "tools/commands/bench_allreduce_rank.hpp"

namespace troupe::tools {
namespace {

using nlohmann::json;

struct allreduce_arguments {
  int world = 2;
  std::string bytes = "4K,1M,16M,64M";
  int rings = 1;
  std::string chunk = "1M";
  bool shared_memory = true;
  bool json_output = false;
  std::string transport = "ucx";
};

/// The driver: a local manifest with `world` single-worker nodes, one rank process each.
void run_driver(const allreduce_arguments& args) {
  parse_allreduce_sizes(args.bytes);
  if (args.world < 1 || args.world > 64) throw error("--world: expected 1..64");
  if (args.rings < 1 || args.rings > io::max_rings) throw make_error("--rings: expected 1..", io::max_rings);
  const auto chunk = io::parse_byte_count(args.chunk, "--chunk-bytes");
  const bool nccl = args.transport == "nccl";
  if (nccl && args.rings != 1) throw error("--rings: 1 with --transport nccl (one communicator; NCCL picks its own rings)");
  const io::scratch_directory scratch("troupe-bench-allreduce");
  json manifest = {{"head", {{"host", "127.0.0.1"}, {"port", io::free_local_port()}}},
                   {"rings", {{"count", args.rings}, {"chunk_bytes", chunk}, {"shared_memory", args.shared_memory}}},
                   {"timeouts", {{"join_s", 60}, {"collective_s", 60}}},
                   {"oversubscribe", true},
                   {"faults", {{"policy", "abort"}}},
                   {"transport", args.transport}};
  for (int r = 0; r < args.world; ++r) {
    manifest["nodes"].push_back({{"name", "rank" + std::to_string(r)}, {"host", "127.0.0.1"}, {"workers", 1}});
    if (nccl) manifest["nodes"].back()["devices"] = json::array({"cuda:" + std::to_string(r)});  // one GPU per rank
  }
  io::write_file_atomically(scratch / "manifest.json", manifest.dump(2));
  const auto binary = io::current_executable().string();
  std::vector<cluster::node_command> commands;
  for (int r = 0; r < args.world; ++r)
    commands.push_back({"rank" + std::to_string(r), cluster::launch_method::local,
                        {binary, "bench", "allreduce-rank", "--manifest", (scratch / "manifest.json").string(), "--node",
                         "rank" + std::to_string(r), "--bytes", args.bytes, "--out", (scratch / "result.json").string()}});
  const int status = cluster::run_nodes(commands, std::chrono::seconds(90));
  if (!std::filesystem::exists(scratch / "result.json")) throw error("bench allreduce: a rank failed");
  const auto result = json::parse(io::read_whole_file(scratch / "result.json"));
  std::printf("%s\n", args.json_output ? result.dump().c_str() : result.dump(2).c_str());
  if (status != 0 || !result.value("correct", false))
    throw error("bench allreduce: a rank failed or a sum was wrong (see \"correct\" in the result)");
}

}  // namespace

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
  driver->add_option("--transport", args->transport,
                     "ucx (host memory, one process per rank) or nccl (rank r on cuda:r, in device memory)")
      ->check(CLI::IsMember({"ucx", "nccl"}))
      ->capture_default_str();
  driver->add_flag("--json", args->json_output, "print one JSON line");
  driver->callback([args] { run_driver(*args); });

  auto rank_options = std::make_shared<allreduce_rank_options>();
  auto* rank = bench->add_subcommand("allreduce-rank", "one rank of bench allreduce (started by it)");
  rank->group("");  // hidden from --help
  rank->add_option("--manifest", rank_options->manifest)->required();
  rank->add_option("--node", rank_options->node)->required();
  rank->add_option("--bytes", rank_options->bytes)->required();
  rank->add_option("--out", rank_options->out)->required();
  rank->callback([rank_options] {
    try {
      run_allreduce_rank(*rank_options);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "troupe: error: %s: %s\n", rank_options->node.c_str(), e.what());
      std::fflush(stderr);
      std::_Exit(1);
    }
  });
}

}  // namespace troupe::tools
