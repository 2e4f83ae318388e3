#include "cluster/manifest.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "io/comm/ring_schedule.hpp"
#include "io/config/json_fields.hpp"
#include "io/os/file_util.hpp"
#include "messages/error.hpp"

namespace troupe::cluster {
namespace {

using nlohmann::json;

constexpr int64_t max_workers_per_node = 4096;

node_spec parse_node(const json& element, const std::string& source, const std::string& path) {
  io::json_fields fields(element, source, path);
  node_spec node;
  node.name = fields.string("name", "");
  if (node.name.empty()) fields.fail("name", "a non-empty node name");
  node.host = fields.string("host", "");
  if (!is_valid_host(node.host))
    fields.fail("host", "a host name or address (letters, digits, '.', '-', '_', ':'; not starting with '-')");
  node.workers = fields.integer("workers", 1, 1, max_workers_per_node);
  node.threads_per_worker = fields.integer("threads_per_worker", 1, 1, 1024);
  const json devices = fields.array("devices");
  for (const auto& device : devices) {
    if (!device.is_string() || (device != "cpu" && device.get<std::string>().rfind("cuda:", 0) != 0))
      fields.fail("devices", "a list of \"cpu\" or \"cuda:N\" strings, one per worker");
    node.devices.push_back(device.get<std::string>());
  }
  if (!node.devices.empty() && static_cast<int64_t>(node.devices.size()) != node.workers)
    fields.fail("devices", detail::concat("one device per worker (", node.workers, " workers)"));
  fields.finish();
  return node;
}

/// Ring orders given explicitly: each must be a permutation of 0..world-1.
std::vector<std::vector<int>> parse_orders(const io::json_fields& rings, const json& value, int64_t world,
                                          const std::string& source) {
  std::vector<std::vector<int>> orders;
  for (std::size_t r = 0; r < value.size(); ++r) {
    const std::string where = rings.where("order") + "[" + std::to_string(r) + "]";
    const json& ring = value[r];
    if (!ring.is_array() || static_cast<int64_t>(ring.size()) != world)
      throw make_error(source, ": ", where, ": expected a list of all ",
                       world, " ranks (a permutation of 0..", world - 1, "), got ", ring.dump());
    std::vector<int> order;
    for (const auto& rank : ring) {
      if (!rank.is_number_integer() || rank.get<int64_t>() < 0 || rank.get<int64_t>() >= world)
        throw make_error(source, ": ", where, ": expected a permutation of the ranks 0..", world - 1,
                         " (each exactly once), got ", ring.dump(), ": ", rank.dump(), " is not a rank");
      order.push_back(rank.get<int>());
    }
    if (const auto problem = io::ring_order_problem(order, world); !problem.empty())
      throw make_error(source, ": ", where, ": expected a permutation of the ranks 0..", world - 1,
                       " (each exactly once), got ", ring.dump(), ": ", problem);
    orders.push_back(std::move(order));
  }
  return orders;
}

/// One name per host, for tallies by host: every loopback address is "localhost".
std::string host_key(const std::string& host) { return is_local_host(host) ? std::string("localhost") : host; }

/// Workers per host must fit its cores (and per node its devices) unless oversubscription is
/// allowed: two workers sharing a core halve each other's speed and hide it in the numbers.
void check_capacity(const cluster_manifest& m) {
  std::map<std::string, int64_t> threads_per_host;
  for (const auto& node : m.nodes) {
    threads_per_host[host_key(node.host)] +=
        node.workers * node.threads_per_worker;
    std::set<std::string> distinct(node.devices.begin(), node.devices.end());
    distinct.erase("cpu");
    const auto gpus = std::count_if(node.devices.begin(), node.devices.end(),
                                    [](const std::string& d) { return d != "cpu"; });
    if (!m.oversubscribe && static_cast<int64_t>(distinct.size()) < gpus)
      throw make_error(m.source, ": nodes[", node.name, "].devices: ", gpus, " workers share ", distinct.size(),
                       " GPU(s); give each worker its own device or set \"oversubscribe\": true");
  }
  const auto local = threads_per_host.find("localhost");
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  if (!m.oversubscribe && local != threads_per_host.end() && local->second > cores)
    throw make_error(m.source, ": nodes: the nodes on this host run ", local->second,
                     " worker threads (workers × threads_per_worker) but it has ", cores,
                     " cores; lower them or set \"oversubscribe\": true");
}

/// NCCL sums device memory and puts one rank on a GPU: every worker of an "nccl" job names its
/// own CUDA device, also across the nodes of one host (oversubscription cannot help: NCCL itself
/// refuses a shared GPU, "Duplicate GPU detected", only once every node has started).
void check_nccl_devices(const cluster_manifest& m) {
  std::map<std::pair<std::string, std::string>, std::string> owner;  // (host, device) -> node
  for (const auto& node : m.nodes) {
    if (node.devices.empty())
      throw make_error(m.source, ": nodes[", node.name, "].devices: transport \"nccl\" needs a \"cuda:N\" device for "
                       "each of its ", node.workers, " workers (none given: all \"cpu\")");
    std::set<std::string> seen;
    for (const auto& device : node.devices) {
      if (device.rfind("cuda", 0) != 0)
        throw make_error(m.source, ": nodes[", node.name, "].devices: \"", device,
                         "\" with transport \"nccl\" (NCCL reduces GPU memory: every worker needs \"cuda:N\")");
      if (!seen.insert(device).second)
        throw make_error(m.source, ": nodes[", node.name, "].devices: \"", device, "\" is given to two workers; NCCL "
                         "runs one rank per GPU (give each worker its own device, or fewer workers)");
      const auto [held, fresh] = owner.emplace(std::pair(host_key(node.host), device), node.name);
      if (!fresh)
        throw make_error(m.source, ": nodes[", node.name, "].devices: \"", device, "\" is also node ",
                         held->second, "'s on host ", node.host, "; NCCL runs one rank per GPU (give each node "
                         "of a host its own devices)");
    }
  }
}

}  // namespace

int64_t cluster_manifest::world_size() const {
  int64_t world = 0;
  for (const auto& node : nodes) world += node.workers;
  return world;
}

std::size_t cluster_manifest::node_index(const std::string& name) const {
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == name) return i;
  std::string known;
  for (std::size_t i = 0; i < nodes.size(); ++i) known += (i ? ", " : "") + nodes[i].name;
  throw make_error(source, ": no node called \"", name, "\" (nodes: ", known, ")");
}

int cluster_manifest::first_rank(std::size_t node) const {
  int rank = 0;
  for (std::size_t i = 0; i < node; ++i) rank += static_cast<int>(nodes[i].workers);
  return rank;
}

bool is_valid_host(const std::string& host) {
  // Host names (RFC 1123 letters, digits, '-', '.'; '_' as /etc/hosts allows), IPv4 and IPv6
  // addresses. It reaches ssh as an argument: a leading '-' would be read as an option.
  return !host.empty() && host.size() <= 253 && host.front() != '-' &&
         std::all_of(host.begin(), host.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == ':';
         });
}

bool is_local_host(const std::string& host) { return host == "127.0.0.1" || host == "localhost" || host == "::1"; }

bool same_host(const std::string& a, const std::string& b) { return a == b || (is_local_host(a) && is_local_host(b)); }

bool single_host(const cluster_manifest& manifest) {
  const auto& first = manifest.nodes.front().host;
  return std::all_of(manifest.nodes.begin(), manifest.nodes.end(),
                     [&](const node_spec& node) { return same_host(node.host, first); });
}

namespace {

// transport, ucx_tls and ssh: how bytes and node processes reach the other hosts.
void parse_transport(io::json_fields& root, cluster_manifest& m) {
  m.transport = root.string("transport", m.transport);
  if (m.transport != "ucx" && m.transport != "nccl") root.fail("transport", "\"ucx\" or \"nccl\"");
  if (m.transport == "nccl") check_nccl_devices(m);
  m.ucx_tls = root.string("ucx_tls", "");
  const bool tls_word = std::all_of(m.ucx_tls.begin(), m.ucx_tls.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_' ||
           c == ',' || c == '^';
  });
  if (root.has("ucx_tls") && (m.ucx_tls.empty() || !tls_word))
    root.fail("ucx_tls", "a UCX_TLS list such as \"tcp\" or \"tcp,self\" (transport names, ',' between, '^' to exclude)");
  if (!m.ucx_tls.empty() && m.transport != "ucx") root.fail("ucx_tls", "no ucx_tls with transport \"nccl\"");
  auto ssh = root.object("ssh");
  const auto config = ssh.string("config", "");
  if (!config.empty()) {
    std::filesystem::path path(config);
    if (path.is_relative()) path = std::filesystem::path(m.source).parent_path() / path;
    if (!std::filesystem::is_regular_file(path)) ssh.fail("config", "an ssh_config file (" + path.string() + " not found)");
    m.ssh_config = std::filesystem::absolute(path).string();
  }
  ssh.finish();
}

// The `metrics` block: how much of each rank a window lists once the job is large.
void parse_metrics(io::json_fields& root, cluster_manifest& m) {
  auto metrics = root.object("metrics");
  m.metrics.every_rank_up_to = metrics.integer("every_rank_up_to", m.metrics.every_rank_up_to, 1, 1000000);
  m.metrics.slowest_ranks = metrics.integer("slowest_ranks", m.metrics.slowest_ranks, 0, 1000);
  metrics.finish();
}

// The `failover` block: where etcd is (docs/faults.md#head-failover). The survivors must go on
// without the head's node, so failover needs "elastic" and a second node.
void parse_failover(io::json_fields& root, cluster_manifest& m) {
  if (!root.has("failover")) return;
  auto failover = root.object("failover");
  const auto endpoints = failover.array("etcd");
  if (endpoints.empty()) failover.fail("etcd", "a non-empty list of etcd client URLs (\"http://host:2379\")");
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    const auto& url = endpoints[i];
    const bool http = url.is_string() && (url.get<std::string>().rfind("http://", 0) == 0 ||
                                          url.get<std::string>().rfind("https://", 0) == 0);
    if (!http || url.get<std::string>().find(':', url.get<std::string>().find("//") + 2) == std::string::npos)
      failover.fail("etcd", detail::concat("client URLs with a port (\"http://host:2379\"); entry ", i, " is ",
                                           url.dump()));
    m.failover.etcd.push_back(url.get<std::string>());
  }
  m.failover.lease_s = failover.integer("lease_s", m.failover.lease_s, 1, 60);
  m.failover.electors = failover.integer("electors", m.failover.electors, 2, 1000);
  m.failover.prefix = failover.string("prefix", "");
  if (!m.failover.prefix.empty() && m.failover.prefix.front() != '/')
    failover.fail("prefix", "an etcd key prefix starting with '/'");
  failover.finish();
  if (m.nodes.size() < 2) failover.fail("etcd", "two nodes or more (one must be left to take the head's role)");
  if (m.faults.policy != fault_policy::elastic)
    failover.fail("etcd", "faults.policy \"elastic\" (the other nodes go on without the head's node)");
}

}  // namespace

cluster_manifest parse_manifest(const json& root_json, const std::string& source) {
  io::json_fields root(root_json, source);
  cluster_manifest m;
  m.source = source;

  auto head = root.object("head");
  m.head_host = head.string("host", m.head_host);
  if (!is_valid_host(m.head_host))
    head.fail("host", "a host name or address (letters, digits, '.', '-', '_', ':'; not starting with '-')");
  m.head_port = head.integer("port", m.head_port, 1, 65535);
  m.head_node = head.string("node", "");
  head.finish();

  const json nodes = root.array("nodes");
  if (nodes.empty()) root.fail("nodes", "a non-empty list of {name, host, workers, ...}");
  std::set<std::string> names;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto node = parse_node(nodes[i], source, "nodes[" + std::to_string(i) + "]");
    if (!names.insert(node.name).second)
      throw make_error(source, ": nodes[", i, "].name: \"", node.name, "\" is used by two nodes; names must be unique");
    m.nodes.push_back(std::move(node));
  }
  if (m.head_node.empty()) m.head_node = m.nodes.front().name;
  if (names.count(m.head_node) == 0) head.fail("node", "the name of one of the nodes");

  auto rings = root.object("rings");
  m.rings.count = rings.integer("count", 1, 1, io::max_rings);
  m.rings.chunk_bytes = rings.integer("chunk_bytes", m.rings.chunk_bytes, 4096, int64_t{1} << 30);
  m.rings.shared_memory = rings.boolean("shared_memory", m.rings.shared_memory);
  const json order = rings.raw("order");
  if (order.is_array()) {
    m.rings.orders = parse_orders(rings, order, m.world_size(), source);
    if (static_cast<int64_t>(m.rings.orders.size()) != m.rings.count)
      rings.fail("order", detail::concat("\"auto\" or one rank list per ring (count = ", m.rings.count, ")"));
  } else if (!order.is_null() && order != "auto") {
    rings.fail("order", "\"auto\" or a list of rank lists, one permutation of the ranks per ring");
  }
  rings.finish();

  parse_transport(root, m);

  auto timeouts = root.object("timeouts");
  m.timeouts.join = std::chrono::seconds(timeouts.integer("join_s", m.timeouts.join.count(), 1, 86400));
  m.timeouts.collective =
      std::chrono::seconds(timeouts.integer("collective_s", m.timeouts.collective.count(), 1, 86400));
  m.timeouts.window = std::chrono::seconds(timeouts.integer("window_s", m.timeouts.window.count(), 1, 86400 * 7));
  m.timeouts.checkpoint =
      std::chrono::seconds(timeouts.integer("checkpoint_s", m.timeouts.checkpoint.count(), 1, 86400));
  m.timeouts.stop = std::chrono::seconds(timeouts.integer("stop_s", m.timeouts.stop.count(), 1, 86400));
  m.timeouts.heartbeat_period = std::chrono::milliseconds(
      timeouts.integer("heartbeat_period_ms", m.timeouts.heartbeat_period.count(), 10, 60000));
  m.timeouts.heartbeat = std::chrono::milliseconds(
      timeouts.integer("heartbeat_ms", m.timeouts.heartbeat.count(), 3 * m.timeouts.heartbeat_period.count(), 3600000));
  m.timeouts.link_stall =
      std::chrono::milliseconds(timeouts.integer("link_stall_ms", m.timeouts.link_stall.count(), 100, 3600000));
  timeouts.finish();
  auto faults = root.object("faults");
  const auto default_policy = m.nodes.size() > 1 ? "elastic" : "abort";
  const auto policy = faults.choice("policy", default_policy, {"abort", "elastic", "restart"});
  m.faults.policy = policy == "elastic" ? fault_policy::elastic
                    : policy == "restart" ? fault_policy::restart
                                          : fault_policy::abort;
  m.faults.min_nodes =
      faults.integer("min_nodes", m.faults.min_nodes, 1, std::max<int64_t>(1, static_cast<int64_t>(m.nodes.size())));
  m.faults.max_restarts = faults.integer("max_restarts", m.faults.max_restarts, 0, 1000);
  if (m.faults.max_restarts > 0 && m.faults.policy == fault_policy::abort)
    faults.fail("max_restarts", "0 under faults.policy \"abort\" (restarts need \"elastic\" or \"restart\")");
  m.faults.straggler_share = faults.number("straggler_share", m.faults.straggler_share, 0.0, 100.0);
  m.faults.straggler_windows = faults.integer("straggler_windows", m.faults.straggler_windows, 1, 1000000);
  m.faults.straggler_min_seconds = faults.number("straggler_min_s", m.faults.straggler_min_seconds, 0.0, 86400.0);
  faults.finish();
  parse_metrics(root, m);
  parse_failover(root, m);

  m.oversubscribe = root.boolean("oversubscribe", false);
  root.finish();
  check_capacity(m);
  return m;
}

cluster_manifest parse_hostfile(const std::string& text, const std::string& source) {
  json root = json::object();
  root["nodes"] = json::array();
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string host, slots;
    if (!(words >> host)) continue;
    int64_t count = 1;
    if (words >> slots) {
      std::string extra;
      char* end = nullptr;
      if (slots.rfind("slots=", 0) == 0) count = std::strtoll(slots.c_str() + 6, &end, 10);
      if (slots.rfind("slots=", 0) != 0 || end == nullptr || *end != '\0' || count < 1 || (words >> extra))
        throw make_error(source, ":", number, ": expected `host slots=N` (a DeepSpeed hostfile line), got \"", line,
                         "\"");
    }
    root["nodes"].push_back({{"name", host}, {"host", host}, {"workers", count}});
  }
  if (root["nodes"].empty()) throw make_error(source, ": the hostfile lists no hosts");
  root["head"] = {{"host", root["nodes"][0]["host"]}};
  return parse_manifest(root, source);
}

json manifest_for_hosts(const std::vector<std::string>& hosts, const std::vector<int64_t>& workers, json base,
                        std::size_t head_index) {
  TROUPE_ENFORCE(!hosts.empty() && hosts.size() == workers.size() && head_index < hosts.size(),
                 "one worker count per host, the head among them");
  if (!base.is_object()) base = json::object();
  auto nodes = json::array();
  for (std::size_t i = 0; i < hosts.size(); ++i)
    nodes.push_back({{"name", hosts[i]}, {"host", hosts[i]}, {"workers", workers[i]}});
  base["nodes"] = std::move(nodes);
  auto head = base.contains("head") && base["head"].is_object() ? base["head"] : json::object();
  head["host"] = hosts[head_index];
  head["node"] = hosts[head_index];
  base["head"] = std::move(head);
  return base;
}

namespace {

/// A manifest file's text; throws naming the file when there is none.
std::string manifest_text(const std::filesystem::path& file) {
  if (!std::filesystem::is_regular_file(file)) throw make_error(file.string(), ": manifest file not found");
  const auto bytes = io::read_file_bytes(file);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

/// JSON when the text starts with '{'; otherwise a DeepSpeed hostfile.
bool json_manifest(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{';
}

}  // namespace

json read_base_manifest(const std::string& file) {
  if (file.empty()) return json::object();
  const auto text = manifest_text(file);
  if (!json_manifest(text))
    throw make_error(file, ": where a scheduler gives the nodes, --manifest may only be a JSON manifest (rings, "
                           "timeouts, faults, head.port), not a hostfile");
  return io::parse_json_text(text, file);
}

cluster_manifest load_manifest(const std::filesystem::path& file) {
  const auto text = manifest_text(file);
  cluster_manifest manifest;
  if (json_manifest(text)) {
    manifest = parse_manifest(io::parse_json_text(text, file.string()), file.string());
  } else {
    manifest = parse_hostfile(text, file.string());
  }
  manifest.file_hash = io::xxh64(text.data(), text.size());
  return manifest;
}

}  // namespace troupe::cluster
