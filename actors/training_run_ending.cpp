#include "actors/training_run.hpp"

#include <algorithm>

#include "actors/metrics_hub.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"
#include "messages/error_code.hpp"

namespace troupe::actors {
namespace {

bool is_collective_failure(const caf::error& reason) {
  return reason.category() == caf::atom("troupe") &&
         (reason.code() == static_cast<uint8_t>(messages::errc::collective_failed) ||
          reason.code() == static_cast<uint8_t>(messages::errc::timed_out));
}

}  // namespace

/// Waits for every local worker's summary; any actor going down with a reason first is the
/// failure to report. Each finished window restarts the timeout, so it bounds one window.
std::optional<training_summary> training_run::await_summaries() {
  std::optional<training_summary> summary;
  int summaries = 0;
  int64_t last_step = start_.optimizer_steps;  // of the newest window report
  while (summaries < local_workers_ && failure_.empty() && !next_generation_) {
    supervisor_->receive(
        [&](messages::done_atom, training_summary& s) {
          if (summaries++ == 0) summary = std::move(s);
        },
        [&](messages::window_atom, const messages::window_report& report) { note_window(report, last_step); },
        [&](messages::abort_atom, const std::string& reason) { failure_ = reason; },
        [&](messages::suspect_atom, int32_t peer, const std::string& reason) {
          // A ring peer that stays silent while the head still hears it (a broken link): let
          // the head decide; under "abort" the ring's own failure stops the job anyway. Only
          // this generation's reducers speak for it (ranks are renumbered in the next).
          if (reducers_.count(caf::actor_cast<caf::actor_addr>(supervisor_->current_sender())) == 0) return;
          if (role_.elastic && role_.coordinator)
            supervisor_->send(role_.coordinator, messages::suspect_atom::value, role_.node, role_.generation, peer,
                              reason);
        },
        [&](messages::membership_atom, uint64_t generation, const std::string& reason) {
          if (generation <= role_.generation) return;  // an older generation's news
          next_generation_ = generation;
          replan_reason_ = reason;
        },
        [&](caf::down_msg& down) {
          gone_.insert(down.source);
          if (role_.coordinator && down.source == role_.coordinator)
            failure_ =
                "the head node's coordinator at " + role_.head + " went down (" + system_.render(down.reason) + ")";
          else if (down.reason && role_.elastic && is_collective_failure(down.reason))
            await_lost_node(system_.render(down.reason));
          else if (down.reason)
            failure_ = system_.render(down.reason);
        },
        caf::after(next_wait()) >> [&] {
          if (!lost_peer_failure_.empty()) {
            failure_ = lost_peer_failure_ + " (and the head named no lost node within " +
                       std::to_string(lost_peer_wait().count()) + " ms)";
            return;
          }
          failure_ = "the window of step " + std::to_string(last_step + 1) +
                     " did not finish within the window timeout of " +
                     std::to_string(options_.window_timeout.count()) +
                     " s: no report from the workers (a worker stalled, its data loader starved, or a ring peer "
                     "stopped answering)";
        });
    if (next_generation_) return std::nullopt;
  }
  if (summary && metrics_actor_) {
    // Every report of this node reaches the hub before the node says it finished.
    supervisor_->request(metrics_actor_, std::chrono::seconds(60), messages::flush_atom::value, true, int64_t{0})
        .receive([] {}, [&](caf::error& e) { failure_ = system_.render(e); });
    finish_metrics_hub(supervisor_, hub_);
  }
  return summary;
}

void training_run::note_window(const messages::window_report& report, int64_t& last_step) {
  last_step = report.step;
  if (report.rank == first_rank_) losses_.push_back(report.loss);
}

void training_run::await_lost_node(const std::string& failure) {
  if (!lost_peer_failure_.empty()) return;
  lost_peer_failure_ = failure;
  lost_peer_deadline_ = std::chrono::steady_clock::now() + lost_peer_wait();
}

std::chrono::milliseconds training_run::next_wait() const {
  if (lost_peer_failure_.empty()) return options_.window_timeout;
  const auto left = lost_peer_deadline_ - std::chrono::steady_clock::now();
  return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(left));
}

/// The end of a generation (see run_generation): stops every actor, waits until all are gone
/// (none may touch a trainer or a transport afterwards), and leaves the trainers, discarded
/// of the window in flight, to `carried_`.
void training_run::hand_over() {
  abort_transports("membership generation " + std::to_string(role_.generation) + " ended: " + replan_reason_);
  std::set<caf::actor_addr> running;
  for (const auto& actor : spawned_) {
    if (gone_.count(actor.address()) == 0) running.insert(actor.address());  // its down was read already
    supervisor_->send_exit(actor, caf::exit_reason::user_shutdown);
  }
  int64_t last_step = 0;
  std::string aborted;  // the head gave up while this node stopped
  const auto limit = options_.checkpoint_timeout + std::chrono::seconds(30);  // a save may be finishing
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!running.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      throw make_error("ending membership generation ", role_.generation, ": ", running.size(),
                       " actor(s) did not stop within ", limit.count(), " s");
    supervisor_->receive([&](caf::down_msg& down) { running.erase(down.source); },
                         [&](messages::window_atom, const messages::window_report& report) { note_window(report, last_step); },
                         [&](messages::done_atom, training_summary&) {},
                         [&](messages::abort_atom, const std::string& reason) { aborted = reason; },
                         [&](messages::suspect_atom, int32_t, const std::string&) {},  // this generation's: moot
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
