#include "cluster/membership_state.hpp"

#include <algorithm>
#include <tuple>

#include "messages/capnp_message.hpp"
#include "messages/error.hpp"
#include "messages/schemas/cluster.capnp.h"

namespace troupe::cluster {
namespace {

constexpr uint64_t traversal_limit_words = uint64_t{1} << 27;  // 1 GiB, as for plans
constexpr std::size_t max_nodes = 65536;

bool same_join(const join_request& a, const join_request& b) {
  return std::tie(a.protocol_version, a.node, a.manifest_hash, a.config_hash, a.workers, a.generation,
                  a.committed_steps, a.restarted, a.secret, a.nccl_ids, a.probe_port, a.incarnation, a.standby,
                  a.to_forming) ==
         std::tie(b.protocol_version, b.node, b.manifest_hash, b.config_hash, b.workers, b.generation,
                  b.committed_steps, b.restarted, b.secret, b.nccl_ids, b.probe_port, b.incarnation, b.standby,
                  b.to_forming);
}

bool same_member(const plan_member& a, const plan_member& b) {
  return std::tie(a.node, a.first_rank, a.workers, a.probe_port) ==
         std::tie(b.node, b.first_rank, b.workers, b.probe_port);
}

void set_names(capnp::List<capnp::Text>::Builder out, const std::set<std::string>& names) {
  unsigned i = 0;
  for (const auto& name : names) out.set(i++, name);
}

std::set<std::string> get_names(capnp::List<capnp::Text>::Reader in, const std::string& field, const std::string& where) {
  if (in.size() > max_nodes) throw make_error(where, ": ", in.size(), " ", field, " (expected at most ", max_nodes, ")");
  std::set<std::string> names;
  for (auto name : in)
    if (!names.insert(name).second) throw make_error(where, ": ", field, " lists node ", name.cStr(), " twice");
  return names;
}

/// Every name of `subset` is a member.
void check_members(const std::set<std::string>& subset, const std::set<std::string>& members, const std::string& field,
                   const std::string& where) {
  for (const auto& name : subset)
    if (members.count(name) == 0) throw make_error(where, ": ", field, " names node ", name, ", not a member");
}

}  // namespace

const char* phase_name(coordinator_phase phase) {
  switch (phase) {
    case coordinator_phase::forming: return "forming";
    case coordinator_phase::training: return "training";
    case coordinator_phase::finishing: return "finishing";
    case coordinator_phase::released: return "released";
    case coordinator_phase::stopped: return "stopped";
    case coordinator_phase::ended: return "ended";
  }
  return "unknown";
}

bool same_decisions(const membership_state& a, const membership_state& b) {
  const auto same_member = [](const plan_member& x, const plan_member& y) {
    return x.node == y.node && x.first_rank == y.first_rank && x.workers == y.workers;
  };
  return a.phase == b.phase && a.generation == b.generation && a.members == b.members &&
         a.start_steps == b.start_steps && a.finished == b.finished && a.plan.size() == b.plan.size() &&
         std::equal(a.plan.begin(), a.plan.end(), b.plan.begin(), same_member);
}

decision_marks decision_marks_of(const membership_state& state) {
  return {state.phase, state.generation, state.start_steps, state.members.size(), state.finished.size(),
          state.plan.size()};
}

bool operator==(const decision_marks& a, const decision_marks& b) {
  return a.phase == b.phase && a.generation == b.generation && a.start_steps == b.start_steps &&
         a.members == b.members && a.finished == b.finished && a.plan == b.plan;
}

bool operator==(const membership_state& a, const membership_state& b) {
  const auto same_joins = a.joins.size() == b.joins.size() &&
                          std::equal(a.joins.begin(), a.joins.end(), b.joins.begin(), [](const auto& x, const auto& y) {
                            return x.first == y.first && same_join(x.second, y.second);
                          });
  const auto same_plan =
      a.plan.size() == b.plan.size() && std::equal(a.plan.begin(), a.plan.end(), b.plan.begin(), same_member);
  return same_joins && same_plan &&
         std::tie(a.phase, a.generation, a.members, a.start_steps, a.finished, a.departed, a.stop_reason) ==
             std::tie(b.phase, b.generation, b.members, b.start_steps, b.finished, b.departed, b.stop_reason);
}

std::string encode_membership_state(const membership_state& state) {
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<schema::MembershipState>();
  out.setPhase(static_cast<uint8_t>(state.phase));
  out.setGeneration(state.generation);
  set_names(out.initMembers(static_cast<unsigned>(state.members.size())), state.members);
  auto joins = out.initJoins(static_cast<unsigned>(state.joins.size()));
  unsigned i = 0;
  for (const auto& [name, join] : state.joins) {
    const auto bytes = encode_join(join);
    joins.set(i++, kj::arrayPtr(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size()));
  }
  auto plan = out.initPlan(static_cast<unsigned>(state.plan.size()));
  for (std::size_t m = 0; m < state.plan.size(); ++m) {
    plan[m].setNode(state.plan[m].node);
    plan[m].setFirstRank(static_cast<uint32_t>(state.plan[m].first_rank));
    plan[m].setWorkers(static_cast<uint32_t>(state.plan[m].workers));
    plan[m].setProbePort(state.plan[m].probe_port);
  }
  out.setStartSteps(state.start_steps);
  set_names(out.initFinished(static_cast<unsigned>(state.finished.size())), state.finished);
  set_names(out.initDeparted(static_cast<unsigned>(state.departed.size())), state.departed);
  out.setStopReason(state.stop_reason);
  return messages::flat_message_bytes<std::string>(message);
}

membership_state decode_membership_state(const std::string& bytes, const std::string& source) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = traversal_limit_words;
  const std::string where = "membership state from " + source;
  return messages::read_flat_message<schema::MembershipState>(
      bytes.data(), bytes.size(), options, where, [&](schema::MembershipState::Reader in) {
        membership_state state;
        if (in.getPhase() >= coordinator_phase_count)
          throw make_error(where, ": phase ", static_cast<int>(in.getPhase()), " (expected 0..",
                           coordinator_phase_count - 1, ")");
        state.phase = static_cast<coordinator_phase>(in.getPhase());
        state.generation = in.getGeneration();
        state.members = get_names(in.getMembers(), "members", where);
        if (in.getJoins().size() > max_nodes) throw make_error(where, ": ", in.getJoins().size(), " joins");
        for (auto data : in.getJoins()) {
          auto join = decode_join(std::string(reinterpret_cast<const char*>(data.begin()), data.size()), source);
          if (state.members.count(join.node) == 0) throw make_error(where, ": a join of node ", join.node, ", not a member");
          const auto name = join.node;
          if (!state.joins.emplace(name, std::move(join)).second)
            throw make_error(where, ": two joins of node ", name);
        }
        if (in.getPlan().size() > max_nodes) throw make_error(where, ": a plan of ", in.getPlan().size(), " members");
        for (auto member : in.getPlan())
          state.plan.push_back({member.getNode(), static_cast<int>(member.getFirstRank()),
                                static_cast<int>(member.getWorkers()), member.getProbePort()});
        state.start_steps = in.getStartSteps();
        if (state.start_steps < 0) throw make_error(where, ": start step ", state.start_steps, " (expected ≥ 0)");
        state.finished = get_names(in.getFinished(), "finished", where);
        state.departed = get_names(in.getDeparted(), "departed", where);
        check_members(state.finished, state.members, "finished", where);
        check_members(state.departed, state.finished, "departed (of the finished)", where);
        state.stop_reason = in.getStopReason();
        return state;
      });
}

}  // namespace troupe::cluster
