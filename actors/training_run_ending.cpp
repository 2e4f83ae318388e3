#include "actors/training_run.hpp"

#include <algorithm>

#include "actors/metrics_hub.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"
#include "messages/error_code.hpp"

namespace troupe::actors {
namespace {

/// (CAF 0.17's category() of an empty error reads through a null pointer: ask only of a real one.)
bool is_collective_failure(const caf::error& reason) {
  return reason && reason.category() == caf::atom("troupe") &&
         (reason.code() == static_cast<uint8_t>(messages::errc::collective_failed) ||
          reason.code() == static_cast<uint8_t>(messages::errc::timed_out));
}

}  // namespace

/// Waits for every local worker's summary. What each message means is the node machine's
/// (cluster/node_machine.hpp, docs/architecture.md#a-nodes-transition-table): the wait ends when
/// the machine settles: every summary in, a newer generation announced, or a failure. Each
/// finished window restarts the timeout, so it bounds one window.
std::optional<training_summary> training_run::await_summaries() {
  cluster::node_rules rules;
  rules.node = role_.node;
  rules.generation = role_.generation;
  rules.local_workers = local_workers_;
  rules.clustered = static_cast<bool>(role_.coordinator);
  rules.elastic = role_.elastic;
  rules.failover = role_.failover;
  rules.head = role_.head;
  rules.start_step = start_.optimizer_steps;
  rules.window_timeout = options_.window_timeout;
  rules.verdict_wait = lost_peer_wait();
  membership_ = std::make_unique<cluster::node_machine>(rules);
  std::optional<training_summary> summary;
  while (!membership_->settled() && failure_.empty()) {
    supervisor_->receive(
        [&](messages::done_atom, training_summary& s) {
          if (!summary) summary = std::move(s);
          apply(cluster::worker_summary_event{});
        },
        [&](messages::window_atom, const messages::window_report& report) {
          note_losses(report);
          apply(cluster::window_report_event{report.step});
        },
        [&](messages::abort_atom, const std::string& reason) { apply(cluster::abort_event{reason}); },
        [&](messages::suspect_atom, int32_t peer, const std::string& reason) {
          // Only this generation's reducers speak for it (ranks are renumbered in the next).
          const bool ours = reducers_.count(caf::actor_cast<caf::actor_addr>(supervisor_->current_sender())) != 0;
          apply(cluster::ring_suspicion_event{ours, peer, reason});
        },
        [&](messages::membership_atom, uint64_t generation, const std::string& reason, const std::string& plan) {
          on_membership_news(generation, reason, plan);
        },
        [&](messages::head_lost_atom, const std::string& head, const std::string& reason) {
          // An earlier head's silence, read late, is not this one's.
          if (head == role_.head) apply(cluster::coordinator_down_event{reason});
        },
        [&](caf::down_msg& down) {
          gone_.insert(down.source);
          const auto reason = down.reason ? system_.render(down.reason) : std::string();
          if (role_.coordinator && down.source == role_.coordinator)
            apply(cluster::coordinator_down_event{reason, head_answers_after(down)});
          else
            apply(cluster::actor_down_event{reason, down.reason && is_collective_failure(down.reason)});
        },
        caf::after(next_wait()) >> [&] { apply(cluster::wait_timeout_event{}); });
  }
  if (membership_->state().phase == cluster::node_phase::failed) failure_ = membership_->state().failure;
  if (handing_over()) return std::nullopt;
  if (summary && metrics_actor_) {
    // Every report of this node reaches the hub before the node says it finished.
    supervisor_->request(metrics_actor_, std::chrono::seconds(60), messages::flush_atom::value, true, int64_t{0})
        .receive([] {}, [&](caf::error& e) { failure_ = system_.render(e); });
    finish_metrics_hub(supervisor_, hub_);
  }
  return summary;
}

void training_run::apply(const cluster::node_event& event) {
  std::vector<cluster::node_effect> effects;
  try {
    effects = membership_->step(event);
  } catch (const error& e) {
    failure_ = e.what();
    return;
  }
  for (const auto& effect : effects) {
    if (const auto* suspicion = std::get_if<cluster::forward_suspicion>(&effect))
      // A ring peer that stays silent while the head still hears it (a broken link): let the
      // head decide; under "abort" the ring's own failure stops the job anyway.
      supervisor_->send(role_.coordinator, messages::suspect_atom::value, role_.node, role_.generation,
                        suspicion->peer, suspicion->reason);
    else if (std::holds_alternative<cluster::arm_verdict_deadline>(effect))
      verdict_deadline_ = std::chrono::steady_clock::now() + lost_peer_wait();
  }
}

void training_run::on_membership_news(uint64_t generation, const std::string& reason, const std::string& plan) {
  if (!plan.empty() && generation > announced_plan_.first) announced_plan_ = {generation, plan};
  apply(cluster::membership_news_event{generation, reason});
}

// Only a closed connection may leave the head alive (a coordinator that quit or was killed, a
// fenced head's, says so in its reason); the heartbeats' echoes say whether it does
// (docs/faults.md#a-control-connection-that-breaks).
bool training_run::head_answers_after(const caf::down_msg& down) const {
  if (down.reason != caf::exit_reason::remote_link_unreachable || !role_.head_answers_since) return false;
  return role_.head_answers_since(std::chrono::steady_clock::now());
}

bool training_run::handing_over() const {
  return failure_.empty() && membership_ && membership_->state().phase == cluster::node_phase::handing_over;
}

void training_run::note_losses(const messages::window_report& report) {
  if (report.rank == first_rank_) losses_.push_back(report.loss);
}

std::chrono::milliseconds training_run::next_wait() const {
  if (membership_->state().phase != cluster::node_phase::awaiting_verdict) return options_.window_timeout;
  const auto left = verdict_deadline_ - std::chrono::steady_clock::now();
  return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(left));
}

/// The end of a generation (see run_generation): stops every actor, waits until all are gone
/// (none may touch a trainer or a transport afterwards), and leaves the trainers, discarded
/// of the window in flight, to `carried_`.
void training_run::hand_over() {
  abort_transports("membership generation " + std::to_string(role_.generation) +
                   " ended: " + membership_->state().replan_reason);
  std::set<caf::actor_addr> running;
  for (const auto& actor : spawned_) {
    if (gone_.count(actor.address()) == 0) running.insert(actor.address());  // its down was read already
    supervisor_->send_exit(actor, caf::exit_reason::user_shutdown);
  }
  std::string aborted;  // the head gave up while this node stopped
  const auto limit = options_.checkpoint_timeout + std::chrono::seconds(30);  // a save may be finishing
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!running.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      throw make_error("ending membership generation ", role_.generation, ": ", running.size(),
                       " actor(s) did not stop within ", limit.count(), " s");
    supervisor_->receive([&](caf::down_msg& down) { running.erase(down.source); },
                         [&](messages::window_atom, const messages::window_report& report) { note_losses(report); },
                         [&](messages::done_atom, training_summary&) {},
                         [&](messages::abort_atom, const std::string& reason) { aborted = reason; },
                         [&](messages::suspect_atom, int32_t, const std::string&) {},  // this generation's: moot
                         [&](messages::head_lost_atom, const std::string&, const std::string&) {},
                         caf::after(left) >> [] {});
  }
  if (role_.coordinator) supervisor_->demonitor(role_.coordinator);
  if (!aborted.empty()) throw error(aborted);
  carried_->trainers.clear();
  for (std::size_t local = 0; local < handoffs_.size(); ++local) {
    auto& trainer = *handoffs_[local];
    if (!trainer)
      throw make_error("ending membership generation ", role_.generation, ": the worker of rank ",
                       first_rank_ + static_cast<int>(local), " never built its model");
    trainer->discard_window();
    carried_->trainers.push_back(trainer);
  }
  const int64_t steps = carried_->trainers.front()->optimizer_steps();
  for (std::size_t local = 1; local < carried_->trainers.size(); ++local)
    if (carried_->trainers[local]->optimizer_steps() != steps)
      throw make_error("ending membership generation ", role_.generation, ": the workers of node ", role_.node,
                       " stopped at different steps (", steps, " and ", carried_->trainers[local]->optimizer_steps(),
                       "): the lost node failed during an allreduce that some ranks finished");
  carried_->regions = regions_;
  carried_->windows_done += steps - start_.optimizer_steps;
  carried_->optimizer_steps = steps;
  carried_->next_position = start_.next_position + static_cast<uint64_t>(steps - start_.optimizer_steps) *
                                                       static_cast<uint64_t>(config_.train_batch_size);
  carried_->losses = losses_;
  carried_->run_start_steps = run_start_steps_;
  if (unwritten_windows_) carried_->unwritten_windows = std::move(*unwritten_windows_);  // the actor is gone
}

/// Makes every wait on this process's ring transports fail now, naming `reason`.
void training_run::abort_transports(const std::string& reason) {
  for (const auto& worker : role_.transports)
    for (const auto& transport : worker) transport->abort(reason);
}

void training_run::stop() {
  // Reducers blocked on a peer that failed would wait out the collective timeout before they
  // see their exit: aborting the transports ends those waits now.
  if (!failure_.empty()) abort_transports(failure_);
  if (hub_ && !failure_.empty())  // the windows finished before the failure keep their lines
    supervisor_->request(hub_, std::chrono::seconds(3), messages::flush_atom::value).receive([] {}, [](caf::error&) {});
  for (const auto& actor : spawned_) supervisor_->send_exit(actor, caf::exit_reason::user_shutdown);
  if (role_.coordinator) supervisor_->demonitor(role_.coordinator);
}

}  // namespace troupe::actors
