#include "cluster/plan.hpp"

#include <algorithm>
#include <numeric>
#include <set>

#include "io/comm/ring_schedule.hpp"
#include "messages/capnp_message.hpp"
#include "messages/error.hpp"
#include "messages/schemas/cluster.capnp.h"

namespace troupe::cluster {
namespace {

// Limits on what a peer may send: far above any real cluster, far below what would exhaust
// memory. Cap'n Proto's traversal limit bounds the total a reader will follow.
constexpr uint32_t max_world = 65536;
constexpr std::size_t max_address_bytes = 64 * 1024;
constexpr uint64_t traversal_limit_words = uint64_t{1} << 27;  // 1 GiB

/// Decodes `bytes` as root type T and hands the reader to `read`; errors name the sender.
template <class T, class Read>
auto with_reader(const std::string& bytes, const std::string& what, const std::string& sender, Read read) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = traversal_limit_words;
  return messages::read_flat_message<T>(bytes.data(), bytes.size(), options, what + " from " + sender, read);
}

void set_endpoints(capnp::List<schema::WorkerEndpoints>::Builder out, const worker_endpoints& endpoints) {
  for (std::size_t w = 0; w < endpoints.size(); ++w) {
    auto rings = out[w].initRings(endpoints[w].size());
    for (std::size_t r = 0; r < endpoints[w].size(); ++r)
      rings.set(r, kj::arrayPtr(endpoints[w][r].data(), endpoints[w][r].size()));
  }
}

/// `absent_allowed` (plans): a worker may list no addresses at all, one its receiver does not
/// need (encode_member_plans).
/// One worker's address per ring, `expected_rings` of them, each 1..max_address_bytes long.
std::vector<io::transport_address> get_addresses(capnp::List<capnp::Data>::Reader rings, std::size_t expected_rings,
                                                 const std::string& where) {
  if (rings.size() != expected_rings)
    throw make_error(where, ": a worker lists ", rings.size(), " ring addresses, expected ", expected_rings);
  std::vector<io::transport_address> addresses;
  for (auto address : rings) {
    if (address.size() == 0 || address.size() > max_address_bytes)
      throw make_error(where, ": a transport address of ", address.size(), " bytes (expected 1..", max_address_bytes,
                       ")");
    addresses.emplace_back(address.begin(), address.end());
  }
  return addresses;
}

worker_endpoints get_endpoints(capnp::List<schema::WorkerEndpoints>::Reader in, std::size_t expected_rings,
                               const std::string& where, bool absent_allowed = false) {
  worker_endpoints endpoints;
  for (auto worker : in) {
    if (absent_allowed && worker.getRings().size() == 0) endpoints.emplace_back();
    else endpoints.push_back(get_addresses(worker.getRings(), expected_rings, where));
  }
  return endpoints;
}

void check_version(uint32_t version, const std::string& what, const std::string& sender) {
  if (version != cluster_protocol_version)
    throw make_error(what, " from ", sender, ": cluster protocol version ", version, ", this troupe speaks ",
                     cluster_protocol_version, " (run the same troupe build on every node)");
}

}  // namespace

int cluster_plan::previous(int ring, int rank) const {
  const auto& order = ring_orders.at(static_cast<std::size_t>(ring));
  const auto at = std::find(order.begin(), order.end(), rank) - order.begin();
  return order[static_cast<std::size_t>((at + world - 1) % world)];
}

int cluster_plan::next(int ring, int rank) const {
  const auto& order = ring_orders.at(static_cast<std::size_t>(ring));
  const auto at = std::find(order.begin(), order.end(), rank) - order.begin();
  return order[static_cast<std::size_t>((at + 1) % world)];
}

ring_neighbours::ring_neighbours(const cluster_plan& plan) : plan_(plan) {
  for (const auto& order : plan.ring_orders) {
    std::vector<std::size_t> places(order.size());
    for (std::size_t at = 0; at < order.size(); ++at) places.at(static_cast<std::size_t>(order[at])) = at;
    places_.push_back(std::move(places));
  }
}

std::size_t ring_neighbours::place(int ring, int rank) const {
  return places_.at(static_cast<std::size_t>(ring)).at(static_cast<std::size_t>(rank));
}

int ring_neighbours::previous(int ring, int rank) const {
  const auto& order = plan_.ring_orders[static_cast<std::size_t>(ring)];
  return order[(place(ring, rank) + order.size() - 1) % order.size()];
}

int ring_neighbours::next(int ring, int rank) const {
  const auto& order = plan_.ring_orders[static_cast<std::size_t>(ring)];
  return order[(place(ring, rank) + 1) % order.size()];
}

const plan_member* cluster_plan::member_of_rank(int rank) const {
  for (const auto& m : members)
    if (rank >= m.first_rank && rank < m.first_rank + m.workers) return &m;
  return nullptr;
}

const plan_member& cluster_plan::member(const std::string& node) const {
  for (const auto& m : members)
    if (m.node == node) return m;
  throw make_error("the plan of generation ", generation, " has no node ", node, " (it was left out)");
}

std::vector<std::vector<int>> auto_ring_orders(int world, int rings) {
  std::vector<std::vector<int>> orders;
  for (int r = 0; r < rings; ++r) {
    std::vector<int> order(static_cast<std::size_t>(world));
    std::iota(order.begin(), order.end(), 0);
    std::rotate(order.begin(), order.begin() + (r / 2) % std::max(world, 1), order.end());
    if (r % 2 == 1) std::reverse(order.begin(), order.end());
    orders.push_back(std::move(order));
  }
  return orders;
}

namespace {

void set_nccl_ids(capnp::List<capnp::Data>::Builder out, const std::vector<nccl_id>& ids) {
  for (std::size_t r = 0; r < ids.size(); ++r) out.set(static_cast<unsigned>(r), kj::arrayPtr(ids[r].data(), ids[r].size()));
}

/// None, or exactly one id of exactly nccl_id's size per ring.
std::vector<nccl_id> get_nccl_ids(capnp::List<capnp::Data>::Reader in, std::size_t rings, const std::string& where) {
  std::vector<nccl_id> ids;
  if (in.size() == 0) return ids;
  if (in.size() != rings) throw make_error(where, ": ", in.size(), " NCCL ids for ", rings, " rings");
  for (auto bytes : in) {
    if (bytes.size() != std::tuple_size<nccl_id>::value)
      throw make_error(where, ": an NCCL id of ", bytes.size(), " bytes (expected ", std::tuple_size<nccl_id>::value, ")");
    nccl_id id;
    std::copy(bytes.begin(), bytes.end(), id.begin());
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

std::string encode_join(const join_request& join) {
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<schema::JoinRequest>();
  out.setProtocolVersion(join.protocol_version);
  out.setNode(join.node);
  out.setManifestHash(join.manifest_hash);
  out.setConfigHash(join.config_hash);
  set_endpoints(out.initWorkers(join.workers.size()), join.workers);
  out.setGeneration(join.generation);
  out.setCommittedSteps(join.committed_steps);
  out.setRestarted(join.restarted);
  out.setProbePort(join.probe_port);
  out.setIncarnation(join.incarnation);
  out.setSecret(kj::arrayPtr(reinterpret_cast<const kj::byte*>(join.secret.data()), join.secret.size()));
  set_nccl_ids(out.initNcclIds(join.nccl_ids.size()), join.nccl_ids);
  set_endpoints(out.initStandby(join.standby.size()), join.standby);
  out.setToForming(join.to_forming);
  return messages::flat_message_bytes<std::string>(message);
}

join_request decode_join(const std::string& bytes, const std::string& sender) {
  return with_reader<schema::JoinRequest>(bytes, "join request", sender, [&](schema::JoinRequest::Reader in) {
    join_request join;
    join.protocol_version = in.getProtocolVersion();
    check_version(join.protocol_version, "join request", sender);
    join.node = in.getNode();
    join.manifest_hash = in.getManifestHash();
    join.config_hash = in.getConfigHash();
    if (in.getWorkers().size() == 0 || in.getWorkers().size() > max_world)
      throw make_error("join request from ", sender, ": ", in.getWorkers().size(), " workers (expected 1..", max_world,
                       ")");
    const auto rings = in.getWorkers()[0].getRings().size();
    if (rings == 0 || rings > static_cast<uint32_t>(io::max_rings))
      throw make_error("join request from ", sender, ": ", rings, " rings (expected 1..", io::max_rings, ")");
    join.workers = get_endpoints(in.getWorkers(), rings, "join request from " + sender);
    join.generation = in.getGeneration();
    join.committed_steps = in.getCommittedSteps();
    join.restarted = in.getRestarted();
    join.probe_port = in.getProbePort();
    join.incarnation = in.getIncarnation();
    if (in.getSecret().size() > max_address_bytes)
      throw make_error("join request from ", sender, ": a secret of ", in.getSecret().size(), " bytes");
    join.secret.assign(reinterpret_cast<const char*>(in.getSecret().begin()), in.getSecret().size());
    join.nccl_ids = get_nccl_ids(in.getNcclIds(), rings, "join request from " + sender);
    if (in.getStandby().size() != 0 && in.getStandby().size() != in.getWorkers().size())
      throw make_error("join request from ", sender, ": standby transports for ", in.getStandby().size(),
                       " workers, ", in.getWorkers().size(), " workers (expected as many, or none)");
    join.standby = get_endpoints(in.getStandby(), rings, "join request from " + sender + ", its standby transports");
    join.to_forming = in.getToForming();
    if (join.committed_steps < 0)
      throw make_error("join request from ", sender, ": ", join.committed_steps, " committed steps (expected ≥ 0)");
    return join;
  });
}

namespace {

/// The ranks whose addresses `member` needs: its own, and their neighbours in every ring.
std::vector<int> ranks_needed_by(const ring_neighbours& neighbours, int rings, const plan_member& member) {
  std::vector<int> needed;
  for (int rank = member.first_rank; rank < member.first_rank + member.workers; ++rank) {
    needed.push_back(rank);
    for (int ring = 0; ring < rings; ++ring) {
      needed.push_back(neighbours.previous(ring, rank));
      needed.push_back(neighbours.next(ring, rank));
    }
  }
  return needed;
}

std::string encode_plan_as(const cluster_plan& plan, bool auto_rings, const std::vector<std::size_t>& listed);

}  // namespace

std::vector<std::pair<std::string, std::string>> encode_member_plans(cluster_plan plan) {
  const auto endpoints = std::move(plan.endpoints);
  const auto members = std::move(plan.members);
  std::vector<std::size_t> holder(static_cast<std::size_t>(plan.world));  // rank → index in members
  for (std::size_t m = 0; m < members.size(); ++m)
    for (int rank = members[m].first_rank; rank < members[m].first_rank + members[m].workers; ++rank)
      holder.at(static_cast<std::size_t>(rank)) = m;
  plan.endpoints.assign(endpoints.size(), {});
  plan.partial = true;
  const ring_neighbours neighbours(plan);
  const auto rings = static_cast<int>(plan.ring_orders.size());
  // Worked out once, not per member: each is O(world), which made a generation O(N²).
  const bool auto_rings = plan.ring_orders == auto_ring_orders(plan.world, rings);
  std::vector<std::pair<std::string, std::string>> plans;
  for (const auto& member : members) {
    const auto needed = ranks_needed_by(neighbours, rings, member);
    std::set<std::size_t> needed_members, listed;
    for (const int rank : needed) {
      plan.endpoints[static_cast<std::size_t>(rank)] = endpoints[static_cast<std::size_t>(rank)];
      needed_members.insert(holder[static_cast<std::size_t>(rank)]);
      if (!endpoints[static_cast<std::size_t>(rank)].empty()) listed.insert(static_cast<std::size_t>(rank));
    }
    plan.members.clear();
    for (const auto m : needed_members) plan.members.push_back(members[m]);
    plans.emplace_back(member.node, encode_plan_as(plan, auto_rings, {listed.begin(), listed.end()}));
    for (const int rank : needed) plan.endpoints[static_cast<std::size_t>(rank)].clear();
  }
  return plans;
}

namespace {

void set_ring_orders(schema::ClusterPlan::Builder out, const cluster_plan& plan, bool auto_rings) {
  if (auto_rings) {
    out.setAutoRings(static_cast<uint32_t>(plan.ring_orders.size()));
    return;
  }
  auto orders = out.initRings(plan.ring_orders.size());
  for (std::size_t r = 0; r < plan.ring_orders.size(); ++r) {
    auto ranks = orders[r].initRanks(plan.ring_orders[r].size());
    for (std::size_t i = 0; i < plan.ring_orders[r].size(); ++i) ranks.set(i, static_cast<uint32_t>(plan.ring_orders[r][i]));
  }
}

/// A partial plan's endpoints: only the ranks that have addresses (`listed`, ascending).
void set_rank_endpoints(schema::ClusterPlan::Builder out, const worker_endpoints& endpoints,
                        const std::vector<std::size_t>& listed) {
  auto ranks = out.initRankEndpoints(static_cast<unsigned>(listed.size()));
  for (std::size_t i = 0; i < listed.size(); ++i) {
    const auto& addresses = endpoints[listed[i]];
    ranks[static_cast<unsigned>(i)].setRank(static_cast<uint32_t>(listed[i]));
    auto rings = ranks[static_cast<unsigned>(i)].initRings(static_cast<unsigned>(addresses.size()));
    for (std::size_t r = 0; r < addresses.size(); ++r)
      rings.set(static_cast<unsigned>(r), kj::arrayPtr(addresses[r].data(), addresses[r].size()));
  }
}

/// encode_plan, told whether the ring orders are the auto ones and (a partial plan) which ranks
/// have addresses.
std::string encode_plan_as(const cluster_plan& plan, bool auto_rings, const std::vector<std::size_t>& listed) {
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<schema::ClusterPlan>();
  out.setProtocolVersion(plan.protocol_version);
  out.setWorld(static_cast<uint32_t>(plan.world));
  set_ring_orders(out, plan, auto_rings);
  out.setChunkBytes(plan.chunk_bytes);
  out.setPartial(plan.partial);
  if (plan.partial) set_rank_endpoints(out, plan.endpoints, listed);
  else set_endpoints(out.initEndpoints(plan.endpoints.size()), plan.endpoints);
  out.setGeneration(plan.generation);
  out.setStartSteps(plan.start_steps);
  set_nccl_ids(out.initNcclIds(plan.nccl_ids.size()), plan.nccl_ids);
  auto electors = out.initElectors(static_cast<unsigned>(plan.electors.size()));
  for (std::size_t i = 0; i < plan.electors.size(); ++i) electors.set(static_cast<unsigned>(i), plan.electors[i]);
  out.setHeadTerm(plan.head_term);
  auto members = out.initMembers(plan.members.size());
  for (std::size_t i = 0; i < plan.members.size(); ++i) {
    members[i].setNode(plan.members[i].node);
    members[i].setFirstRank(static_cast<uint32_t>(plan.members[i].first_rank));
    members[i].setWorkers(static_cast<uint32_t>(plan.members[i].workers));
    members[i].setProbePort(plan.members[i].probe_port);
  }
  return messages::flat_message_bytes<std::string>(message);
}

}  // namespace

std::string encode_plan(const cluster_plan& plan) {
  std::vector<std::size_t> listed;
  if (plan.partial)
    for (std::size_t rank = 0; rank < plan.endpoints.size(); ++rank)
      if (!plan.endpoints[rank].empty()) listed.push_back(rank);
  return encode_plan_as(plan, plan.ring_orders == auto_ring_orders(plan.world, static_cast<int>(plan.ring_orders.size())),
                        listed);
}

namespace {

std::vector<std::vector<int>> read_ring_orders(schema::ClusterPlan::Reader in, const std::string& where) {
  const auto world = in.getWorld();
  const auto rings = in.getAutoRings() > 0 ? in.getAutoRings() : in.getRings().size();
  if (rings == 0 || rings > static_cast<uint32_t>(io::max_rings))
    throw make_error(where, ": ", rings, " rings (expected 1..", io::max_rings, ")");
  if (in.getAutoRings() > 0) {
    if (in.getRings().size() != 0) throw make_error(where, ": both auto rings and listed ring orders");
    return auto_ring_orders(static_cast<int>(world), static_cast<int>(rings));
  }
  std::vector<std::vector<int>> orders;
  for (auto ring : in.getRings()) {
    if (ring.getRanks().size() != world) throw make_error(where, ": a ring order does not list every rank");
    std::vector<int> order;
    for (auto rank : ring.getRanks()) {
      if (rank >= world) throw make_error(where, ": a ring order names rank ", rank, " in a world of ", world);
      order.push_back(static_cast<int>(rank));
    }
    if (const auto problem = io::ring_order_problem(order, static_cast<int>(world)); !problem.empty())
      throw make_error(where, ": a ring order is not a permutation of the ranks: ", problem);
    orders.push_back(std::move(order));
  }
  return orders;
}

/// By rank: a whole plan lists every rank's (some may be absent); a partial one only some, by rank.
worker_endpoints read_endpoints(schema::ClusterPlan::Reader in, std::size_t rings, const std::string& where) {
  if (!in.getPartial()) {
    if (in.getEndpoints().size() != in.getWorld())
      throw make_error(where, ": ", in.getEndpoints().size(), " endpoint lists for ", in.getWorld(), " ranks");
    return get_endpoints(in.getEndpoints(), rings, where, true);
  }
  if (in.getEndpoints().size() != 0) throw make_error(where, ": a member's view with a whole list of endpoints");
  worker_endpoints endpoints(in.getWorld());
  for (auto listed : in.getRankEndpoints()) {
    if (listed.getRank() >= in.getWorld())
      throw make_error(where, ": addresses for rank ", listed.getRank(), " in a world of ", in.getWorld());
    auto& addresses = endpoints[listed.getRank()];
    if (!addresses.empty()) throw make_error(where, ": rank ", listed.getRank(), "'s addresses listed twice");
    addresses = get_addresses(listed.getRings(), rings, where);
  }
  return endpoints;
}

/// A whole plan's members tile the ranks in order, each starting where the previous one ended;
/// a member's view holds some of them, in rank order, none overlapping.
std::vector<plan_member> read_members(schema::ClusterPlan::Reader in, const std::string& where) {
  std::vector<plan_member> members;
  uint32_t next_rank = 0;
  for (auto member : in.getMembers()) {
    const bool in_place = in.getPartial() ? member.getFirstRank() >= next_rank : member.getFirstRank() == next_rank;
    if (!in_place || member.getWorkers() == 0 || member.getWorkers() > max_world ||
        uint64_t{member.getFirstRank()} + member.getWorkers() > in.getWorld())
      throw make_error(where, ": member ", member.getNode().cStr(), " has ranks ", member.getFirstRank(), " + ",
                       member.getWorkers(), ", expected to start at rank ", in.getPartial() ? "≥ " : "", next_rank,
                       " with at least one worker, within the world of ", in.getWorld());
    members.push_back({member.getNode(), static_cast<int>(member.getFirstRank()), static_cast<int>(member.getWorkers()),
                       member.getProbePort()});
    next_rank = member.getFirstRank() + member.getWorkers();
  }
  if (!in.getPartial() && next_rank != in.getWorld())
    throw make_error(where, ": the members' workers add up to ", next_rank, ", the world is ", in.getWorld());
  return members;
}

/// The head's electors: named, at most one a rank.
std::vector<std::string> read_electors(schema::ClusterPlan::Reader in, const std::string& where) {
  if (in.getElectors().size() > in.getWorld())
    throw make_error(where, ": ", in.getElectors().size(), " electors in a world of ", in.getWorld());
  std::vector<std::string> electors;
  for (auto name : in.getElectors()) {
    if (name.size() == 0) throw make_error(where, ": an elector without a name");
    electors.emplace_back(name.cStr());
  }
  return electors;
}

}  // namespace

cluster_plan decode_plan(const std::string& bytes, const std::string& sender) {
  return with_reader<schema::ClusterPlan>(bytes, "cluster plan", sender, [&](schema::ClusterPlan::Reader in) {
    const std::string where = "cluster plan from " + sender;
    cluster_plan plan;
    plan.protocol_version = in.getProtocolVersion();
    check_version(plan.protocol_version, "cluster plan", sender);
    plan.world = static_cast<int>(in.getWorld());
    if (in.getWorld() == 0 || in.getWorld() > max_world)
      throw make_error(where, ": world size ", in.getWorld(), " (expected 1..", max_world, ")");
    plan.ring_orders = read_ring_orders(in, where);
    plan.chunk_bytes = in.getChunkBytes();
    if (plan.chunk_bytes < 4096) throw make_error(where, ": chunk of ", plan.chunk_bytes, " bytes (expected ≥ 4096)");
    plan.partial = in.getPartial();
    plan.endpoints = read_endpoints(in, plan.ring_orders.size(), where);
    plan.generation = in.getGeneration();
    plan.start_steps = in.getStartSteps();
    plan.nccl_ids = get_nccl_ids(in.getNcclIds(), plan.ring_orders.size(), where);
    if (plan.start_steps < 0) throw make_error(where, ": start at step ", plan.start_steps, " (expected ≥ 0)");
    plan.members = read_members(in, where);
    plan.electors = read_electors(in, where);
    plan.head_term = in.getHeadTerm();
    if (plan.head_term < 0) throw make_error(where, ": head term ", plan.head_term, " (expected ≥ 0)");
    return plan;
  });
}

}  // namespace troupe::cluster
