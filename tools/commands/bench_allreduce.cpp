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
  std::string manifest;  ///< --manifest: the ranks run on its nodes (one each) instead of this host
  std::string wire = "fp32";
};

/// The manifest the ranks join: `world` single-worker nodes on this host, or (--manifest) the
/// user's nodes, one rank each, with the benchmark's rings, timeouts and fault policy.
json bench_manifest(const allreduce_arguments& args, uint64_t chunk) {
  const bool nccl = args.transport == "nccl";
  json manifest = {{"head", {{"host", "127.0.0.1"}, {"port", io::free_local_port()}}}, {"oversubscribe", true}};
  if (!args.manifest.empty()) {
    const auto parsed = cluster::load_manifest(args.manifest);  // refuses a bad manifest, naming the field
    manifest["head"] = {{"host", parsed.head_host}, {"port", parsed.head_port}, {"node", parsed.head_node}};
    for (const auto& node : parsed.nodes) manifest["nodes"].push_back({{"name", node.name}, {"host", node.host}, {"workers", 1}});
    if (!parsed.ucx_tls.empty()) manifest["ucx_tls"] = parsed.ucx_tls;
    if (!parsed.ssh_config.empty()) manifest["ssh"] = {{"config", parsed.ssh_config}};
  } else {
    for (int r = 0; r < args.world; ++r) {
      manifest["nodes"].push_back({{"name", "rank" + std::to_string(r)}, {"host", "127.0.0.1"}, {"workers", 1}});
      if (nccl) manifest["nodes"].back()["devices"] = json::array({"cuda:" + std::to_string(r)});  // one GPU per rank
    }
  }
  manifest["rings"] = {{"count", args.rings}, {"chunk_bytes", chunk}, {"shared_memory", args.shared_memory}};
  manifest["timeouts"] = {{"join_s", 60}, {"collective_s", 60}};
  manifest["faults"] = {{"policy", "abort"}};
  manifest["transport"] = args.transport;
  return manifest;
}

/// One rank process per node: fork/exec on this host, ssh (with the manifest's ssh config) on
/// others, which are assumed to share this filesystem (as `troupe launch` does).
std::vector<cluster::node_command> rank_commands(const json& manifest, const allreduce_arguments& args,
                                                 const std::filesystem::path& scratch) {
  const auto binary = io::current_executable().string();
  std::vector<cluster::node_command> commands;
  for (const auto& node : manifest["nodes"]) {
    const auto name = node["name"].get<std::string>(), host = node["host"].get<std::string>();
    std::vector<std::string> argv = {binary, "bench", "allreduce-rank", "--manifest", (scratch / "manifest.json").string(),
                                     "--node", name, "--bytes", args.bytes, "--out", (scratch / "result.json").string(),
                                     "--wire", args.wire};
    if (cluster::is_local_host(host)) {
      commands.push_back({name, cluster::launch_method::local, argv, false, 0, ""});
      continue;
    }
    std::vector<std::string> ssh = {"ssh", "-o", "BatchMode=yes"};
    if (manifest.contains("ssh")) ssh.insert(ssh.end(), {"-F", manifest["ssh"]["config"].get<std::string>()});
    ssh.insert(ssh.end(), {"--", host, "exec " + cluster::shell_quote(argv)});
    commands.push_back({name, cluster::launch_method::ssh, ssh, false, 0, ""});
  }
  return commands;
}

/// Every rank's links (links_file), in rank and ring order.
json gathered_links(const std::filesystem::path& scratch, int world, int rings) {
  json links = json::array();
  for (int rank = 0; rank < world; ++rank)
    for (int ring = 0; ring < rings; ++ring) {
      const auto file = links_file(scratch / "result.json", rank, ring);
      if (std::filesystem::exists(file)) links.push_back(json::parse(io::read_whole_file(file)));
    }
  return links;
}

void run_driver(const allreduce_arguments& args) {
  parse_allreduce_sizes(args.bytes);
  if (args.world < 1 || args.world > 64) throw error("--world: expected 1..64");
  if (args.rings < 1 || args.rings > io::max_rings) throw make_error("--rings: expected 1..", io::max_rings);
  const auto chunk = io::parse_byte_count(args.chunk, "--chunk-bytes");
  if (args.transport == "nccl" && args.rings != 1)
    throw error("--rings: 1 with --transport nccl (one communicator; NCCL picks its own rings)");
  if (args.transport == "nccl" && !args.manifest.empty()) throw error("--manifest: not with --transport nccl");
  if (args.transport == "nccl" && args.wire != "fp32") throw error("--wire: fp32 with --transport nccl");
  const io::scratch_directory scratch("troupe-bench-allreduce");
  const json manifest = bench_manifest(args, chunk);
  io::write_file_atomically(scratch / "manifest.json", manifest.dump(2));
  const int status = cluster::run_nodes(rank_commands(manifest, args, scratch.path()), std::chrono::seconds(90),
                                       std::chrono::seconds(10), stderr);
  if (!std::filesystem::exists(scratch / "result.json")) throw error("bench allreduce: a rank failed");
  auto result = json::parse(io::read_whole_file(scratch / "result.json"));
  result["links"] = gathered_links(scratch.path(), static_cast<int>(manifest["nodes"].size()), args.rings);
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
  driver->add_option("--manifest", args->manifest,
                     "run one rank per node of this manifest (its hosts, ucx_tls and ssh config; --world ignored)");
  driver->add_option("--wire", args->wire,
                     "how the floats cross each link (communication_data_type): fp32, or bf16/fp16/int8 (the sync block's) summed in fp32")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16", "int8"}))
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
  rank->add_option("--wire", rank_options->wire)->check(CLI::IsMember({"fp32", "bf16", "fp16", "int8"}));
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
