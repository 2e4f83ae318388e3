#include "actors/node_heartbeats.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <future>
#include <thread>

#include "actors/event_log.hpp"
#include "actors/indirect_probes.hpp"
#include "io/comm/link_probe.hpp"
#include "actors/shutdown_watchdog.hpp"
#include "messages/atoms.hpp"

namespace troupe::actors {
namespace {

constexpr std::chrono::seconds fence_grace{3};

/// Notes when the head's coordinator goes down (its connection closed), then ends.
caf::behavior head_watcher(caf::event_based_actor* self, caf::actor coordinator,
                           std::shared_ptr<std::atomic<bool>> head_left) {
  self->monitor(coordinator);
  self->set_down_handler([self, head_left](caf::down_msg&) {
    head_left->store(true);
    self->quit();
  });
  return {[](caf::unit_t) {}};
}

io::heartbeat_sender::loss_handler fence_on_loss(const node_heartbeat_settings& s,
                                                 std::shared_ptr<std::atomic<bool>> head_left) {
  return [s, head_left](io::heartbeat_loss loss, uint64_t generation) {
    if (head_left->load()) return;  // the head left and said why itself
    const auto& node = s.node;
    std::string reason;
    const auto silence = "the head at " + s.head + " stopped answering: no heartbeat reply for " +
                         std::to_string(s.datagrams.timeout.count()) + " ms (timeouts.heartbeat_ms)";
    if (loss == io::heartbeat_loss::head_silent && s.failover) {
      // Not fenced: the node follows the head's role (etcd says who holds it, or lets it take it;
      // a node cut off from etcd too fails there). docs/faults.md#head-failover.
      reason = silence + "; following its role";
      s.head_silent->store(true);
      record_event(s.events, {{"event", "head_silent"}, {"node", node}, {"head", s.head}});
      spdlog::error("node {}: {}", node, reason);
      caf::anon_send(s.session, messages::head_lost_atom::value, s.head, reason);
      if (s.on_head_silent) s.on_head_silent();  // while the session stops its generation
      return;
    }
    if (loss == io::heartbeat_loss::head_silent) {
      reason = silence + "; node " + node + " stops training (self-fenced)";
      s.head_silent->store(true);
      record_event(s.events, {{"event", "self_fenced"}, {"node", node}, {"reason", reason}});
      spdlog::error("node {}: {}", node, reason);
    } else {
      reason = "node " + node + " is no longer part of the job: it was declared lost before generation " +
               std::to_string(generation);
      spdlog::error("{}", reason);
    }
    end_process_after(fence_grace, s.events, node, 1);
    caf::anon_send(s.session, messages::abort_atom::value, reason);
  };
}

// Whether any of up to three witnesses hears the head: each asked in parallel for a quarter of the
// heartbeat timeout (the link-probe responders' "does your process hear the head?").
bool witnesses_hear_head(const std::vector<std::pair<std::string, std::uint16_t>>& witnesses, std::uint64_t token,
                         std::chrono::milliseconds budget) {
  std::vector<std::future<bool>> answers;
  for (const auto& [host, port] : witnesses) {
    if (answers.size() == probers_per_round) break;
    answers.push_back(std::async(std::launch::async, [host = host, port = port, token, budget] {
      return io::probe_link(host, port, token, budget, std::chrono::milliseconds(50), io::probe_question::hears_head);
    }));
  }
  bool heard = false;
  for (auto& answer : answers) heard = answer.get() || heard;
  return heard;
}

}  // namespace

node_heartbeats::node_heartbeats(caf::actor_system& system, node_heartbeat_settings settings)
    : node_(settings.node),
      events_(settings.events),
      timeout_(settings.datagrams.timeout),
      period_(settings.datagrams.period) {
  watcher_ = system.spawn(head_watcher, settings.coordinator, head_left_);
  probe_agent_ = system.spawn(probe_agent, probe_agent_settings{settings.node, settings.datagrams.incarnation,
                                                                settings.datagrams.token, settings.coordinator});
  // Before giving up on a silent head, ask the witnesses; while one hears it, wait up to three
  // times the timeout (actors/indirect_probes.hpp).
  settings.datagrams.longest_silence = longest_kept(settings.datagrams.timeout);
  settings.datagrams.head_heard_elsewhere = [node = node_, witnesses = witnesses_, token = settings.datagrams.token,
                                             budget = probe_budget(settings.datagrams.timeout)] {
    std::vector<std::pair<std::string, std::uint16_t>> asked;
    {
      const std::lock_guard lock(witnesses->mutex);
      asked = witnesses->hosts;
    }
    const bool heard = witnesses_hear_head(asked, token, budget);
    if (heard) spdlog::warn("node {}: no heartbeat reply from the head, but another node hears it: waiting", node);
    return heard;
  };
  try {
    sender_ = std::make_unique<io::heartbeat_sender>(settings.datagrams, fence_on_loss(settings, head_left_));
    slot_->sender = sender_.get();
  } catch (...) {
    caf::anon_send_exit(watcher_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(probe_agent_, caf::exit_reason::user_shutdown);
    throw;
  }
}

void node_heartbeats::record_round_trips(uint64_t generation) const {
  const auto trips = sender_->all_round_trips();
  spdlog::info("node {}: heartbeat round trips p50 {:.1f} ms, p99 {:.1f} ms, max {:.1f} ms over {} echoes", node_,
               trips.p50_ms, trips.p99_ms, trips.max_ms, trips.count);
  record_event(events_, {{"event", "heartbeat_round_trips"},
                         {"node", node_},
                         {"generation", generation},
                         {"count", trips.count},
                         {"p50_ms", trips.p50_ms},
                         {"p99_ms", trips.p99_ms},
                         {"max_ms", trips.max_ms}});
}

std::function<messages::heartbeat_round_trips()> node_heartbeats::round_trip_source() const {
  return [slot = slot_] {
    const std::lock_guard lock(slot->mutex);
    if (slot->sender == nullptr) return messages::heartbeat_round_trips{};
    const auto trips = slot->sender->take_round_trips();
    return messages::heartbeat_round_trips{static_cast<uint32_t>(trips.count), trips.p50_ms, trips.p99_ms, trips.max_ms};
  };
}

std::function<bool()> node_heartbeats::head_heard_source() const {
  return [slot = slot_, recently = timeout_ / 2] {
    const std::lock_guard lock(slot->mutex);
    return slot->sender != nullptr && slot->sender->head_heard_within(recently);
  };
}

std::function<bool(std::chrono::steady_clock::time_point)> node_heartbeats::head_answers_source() const {
  return [slot = slot_, wait = reconnect_evidence(period_, timeout_)](std::chrono::steady_clock::time_point since) {
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      {
        const std::lock_guard lock(slot->mutex);
        if (slot->sender == nullptr) return false;
        if (slot->sender->head_heard_within(now - since)) return true;  // an echo at or after `since`
        if (slot->sender->head_port_refused_since(since)) return false;  // its process is gone
      }
      if (now >= since + wait) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
}

void node_heartbeats::set_witnesses(std::vector<std::pair<std::string, std::uint16_t>> witnesses) {
  const std::lock_guard lock(witnesses_->mutex);
  witnesses_->hosts = std::move(witnesses);
}

node_heartbeats::~node_heartbeats() {
  {
    const std::lock_guard lock(slot_->mutex);
    slot_->sender = nullptr;
  }
  sender_.reset();
  caf::anon_send_exit(watcher_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(probe_agent_, caf::exit_reason::user_shutdown);
}

}  // namespace troupe::actors
