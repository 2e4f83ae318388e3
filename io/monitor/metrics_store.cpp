#include "io/monitor/metrics_store.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace troupe::io {
namespace {

void observe(std::vector<double>& buckets, const std::vector<double>& bounds, double value) {
  buckets.resize(bounds.size(), 0.0);
  for (std::size_t i = 0; i < bounds.size(); ++i)
    if (value <= bounds[i]) buckets[i] += 1;
}

}  // namespace

const std::vector<double>& metrics_store::window_seconds_bounds() {
  static const std::vector<double> bounds = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
  return bounds;
}

const std::vector<double>& metrics_store::checkpoint_seconds_bounds() {
  static const std::vector<double> bounds = {0.1, 0.5, 1, 5, 10, 30, 60, 300};
  return bounds;
}

metrics_store::metrics_store(job_description job, store_limits limits)
    : job_(std::move(job)), limits_(limits), straggler_rule_(limits.straggler) {
  totals_.window_seconds_buckets.assign(window_seconds_bounds().size(), 0.0);
  totals_.checkpoint_seconds_buckets.assign(checkpoint_seconds_bounds().size(), 0.0);
}

void metrics_store::add_batch(const messages::metrics_batch& batch, double now) {
  auto& node = nodes_[batch.node];
  node.generation = batch.generation;
  node.resident_bytes = batch.resident_bytes;
  node.last_seen = now;
  node.dropped = batch.dropped;
  if (batch.heartbeats.count > 0) node.heartbeats = batch.heartbeats;
  if (batch.final) node.state = "finished";
  else if (node.state == "lost") node.state = "training";  // a restarted process of the node
  generation_ = std::max(generation_, batch.generation);
  for (const auto& report : batch.windows) {
    node.ranks.insert(report.rank);
    node_of_rank_[report.rank] = batch.node;
    if (report.step <= last_written_step_) {
      ++totals_.late_reports;
      continue;
    }
    auto [it, fresh] = pending_.try_emplace(report.step);
    auto& pending = it->second;
    if (fresh) {
      pending.first_seen = now;
      pending.window.step = report.step;
      pending.window.unix_seconds = now;
    }
    auto& ranks = pending.window.ranks;
    const auto at = std::lower_bound(ranks.begin(), ranks.end(), report.rank,
                                     [](const rank_report& r, int32_t rank) { return r.report.rank < rank; });
    std::vector<messages::ring_link> links;
    for (const auto& link : batch.links)
      if (link.rank == report.rank) links.push_back(link);
    if (at != ranks.end() && at->report.rank == report.rank)
      *at = {batch.node, report, std::move(links)};  // a repeated report (a resent batch): the newer one
    else
      ranks.insert(at, {batch.node, report, std::move(links)});
  }
  for (const auto& checkpoint : batch.checkpoints) add_checkpoint(checkpoint);
  for (const auto& line : batch.log) add_log(line);
  ++version_;
}

std::vector<window_summary> metrics_store::take_due(double now, bool force, int64_t through) {
  std::vector<window_summary> due;
  const int64_t newest = pending_.empty() ? 0 : pending_.rbegin()->first;
  while (!pending_.empty()) {
    auto& [step, pending] = *pending_.begin();
    const auto world = static_cast<std::size_t>(std::max(1, pending.window.first().world_size));
    const bool complete = pending.window.ranks.size() >= world;
    const bool superseded = newest >= step + 2;
    const bool waited = now - pending.first_seen >= limits_.window_grace_seconds;
    if (!(complete || superseded || waited || force || step <= through)) break;
    // eval_every_windows: the ranks' shares of the held-out subset make one perplexity, or
    // (fine-tuning) one task loss and accuracy.
    double eval_sum = 0;
    int64_t eval_tokens = 0, eval_examples = 0, eval_correct = 0;
    for (const auto& r : pending.window.ranks) {
      eval_sum += r.report.eval_loss_sum;
      eval_tokens += r.report.eval_tokens;
      eval_examples += r.report.eval_examples;
      eval_correct += r.report.eval_correct;
    }
    if (eval_tokens > 0) pending.window.eval_perplexity = std::exp(eval_sum / static_cast<double>(eval_tokens));
    if (eval_examples > 0) {
      const auto examples = static_cast<double>(eval_examples);
      pending.window.eval_task = task_evaluation{eval_sum / examples, static_cast<double>(eval_correct) / examples,
                                                 eval_examples};
    }
    due.push_back(std::move(pending.window));
    pending_.erase(pending_.begin());
  }
  if (due.empty()) return due;  // the common case: called with every node's batch
  const auto heartbeats = heartbeats_now();  // a pass over every node: once per due window set
  for (auto& window : due) {
    window.heartbeats = heartbeats;
    name_straggler(window);
    count_phases(window);
    bound_rank_detail(window, limits_.detail);
    record(window);
  }
  return due;
}

std::optional<heartbeat_summary> metrics_store::heartbeats_now() const {
  std::vector<double> medians;
  heartbeat_summary summary;
  for (const auto& [name, node] : nodes_) {
    if (node.state == "lost" || node.heartbeats.count == 0) continue;
    medians.push_back(node.heartbeats.p50_ms);
    if (summary.worst_node.empty() || node.heartbeats.p99_ms > summary.p99_ms) {
      summary.p99_ms = node.heartbeats.p99_ms;
      summary.worst_node = name;
    }
    summary.max_ms = std::max(summary.max_ms, node.heartbeats.max_ms);
  }
  if (medians.empty()) return std::nullopt;
  summary.nodes = static_cast<int64_t>(medians.size());
  std::nth_element(medians.begin(), medians.begin() + static_cast<std::ptrdiff_t>(medians.size() / 2), medians.end());
  summary.p50_ms = medians[medians.size() / 2];
  return summary;
}

std::vector<std::string> metrics_store::take_straggler_warnings() { return std::exchange(straggler_warnings_, {}); }

// Each phase's seconds over the run, summed over the ranks; per rank too while the job is small
// enough to list every rank (its per-worker /metrics series).
void metrics_store::count_phases(const window_summary& window) {
  for (std::size_t p = 0; p < phase_count; ++p) {
    if (window.statistics) {  // a bounded window read back: its mean over all its ranks
      totals_.phase_seconds_all[p] += window.statistics->time[p].mean * static_cast<double>(window.statistics->ranks);
      continue;
    }
    for (const auto& r : window.ranks) totals_.phase_seconds_all[p] += phase_seconds(r.report, p);
  }
  if (window.statistics || static_cast<int64_t>(window.ranks.size()) > limits_.detail.every_rank_up_to) return;
  for (const auto& r : window.ranks)
    for (std::size_t p = 0; p < phase_count; ++p)
      totals_.phase_seconds[{r.report.rank, window_phases[p]}] += phase_seconds(r.report, p);
}

void metrics_store::add_written(window_summary window) {
  for (const auto& r : window.ranks)
    if (!r.node.empty()) {
      nodes_[r.node].ranks.insert(r.report.rank);
      node_of_rank_[r.report.rank] = r.node;
    }
  count_phases(window);
  record(window);
}

// Everything a finished window adds: the recent list, the series, the /metrics totals.
void metrics_store::record(const window_summary& window) {
  last_written_step_ = std::max(last_written_step_, window.step);
  const auto& first = window.first();
  ++totals_.windows;
  totals_.samples += first.samples;
  if (first.skipped_step) ++totals_.skipped_steps;
  observe(totals_.window_seconds_buckets, window_seconds_bounds(), first.window_seconds);
  totals_.window_seconds_sum += first.window_seconds;
  if (window.eval_perplexity) evaluations_.emplace_back(static_cast<double>(window.step), *window.eval_perplexity);
  if (window.eval_task) task_evaluations_.emplace_back(static_cast<double>(window.step), *window.eval_task);
  recent_.push_back(window);
  if (recent_.size() > limits_.recent_windows) recent_.pop_front();
  append_point(window);
  ++version_;
}

// The whole-run series stay within series_points: when full, neighbouring points are averaged
// pairwise (old points at half the resolution) and from then on each new point averages twice
// as many windows. Resolution is uniform over the run and the page stays fast at 100,000 windows.
void metrics_store::append_point(const window_summary& window) {
  const auto& r = window.first();
  bucket_.step.push_back(static_cast<double>(window.step));
  bucket_.loss.push_back(r.loss);
  bucket_.perplexity.push_back(training_perplexity(r));
  bucket_.samples_per_s.push_back(per_second(static_cast<double>(r.samples), r.window_seconds));
  bucket_.tokens_per_s.push_back(per_second(static_cast<double>(r.tokens), r.window_seconds));
  if (static_cast<int64_t>(bucket_.step.size()) < stride_) return;
  const auto mean = [](const std::vector<double>& values) {
    double sum = 0;
    for (double v : values) sum += v;
    return sum / static_cast<double>(values.size());
  };
  series_.step.push_back(bucket_.step.back());
  series_.loss.push_back(mean(bucket_.loss));
  series_.perplexity.push_back(mean(bucket_.perplexity));
  series_.samples_per_s.push_back(mean(bucket_.samples_per_s));
  series_.tokens_per_s.push_back(mean(bucket_.tokens_per_s));
  bucket_ = {};
  if (series_.step.size() < limits_.series_points) return;
  const auto halve = [](std::vector<double>& values, bool last) {
    std::vector<double> merged;
    for (std::size_t i = 0; i + 1 < values.size(); i += 2)
      merged.push_back(last ? values[i + 1] : (values[i] + values[i + 1]) / 2);
    if (values.size() % 2) merged.push_back(values.back());
    values = std::move(merged);
  };
  halve(series_.step, true);
  halve(series_.loss, false);
  halve(series_.perplexity, false);
  halve(series_.samples_per_s, false);
  halve(series_.tokens_per_s, false);
  stride_ *= 2;
}

void metrics_store::add_checkpoint(const messages::checkpoint_report& checkpoint) {
  checkpoints_.push_back(checkpoint);
  if (checkpoints_.size() > limits_.kept_lines) checkpoints_.pop_front();
  if (checkpoint.skipped) {
    ++totals_.checkpoints_skipped;
  } else {
    ++totals_.checkpoints_written;
    observe(totals_.checkpoint_seconds_buckets, checkpoint_seconds_bounds(), checkpoint.seconds);
    totals_.checkpoint_seconds_sum += checkpoint.seconds;
  }
  ++version_;
}

void metrics_store::add_event(const nlohmann::json& event) {
  // A node's heartbeat round trips and its start-up timeline are measurements, not membership
  // changes: not listed (a job of 1,024 nodes would fill the list with start-ups).
  const auto kind = event.value("event", std::string());
  if (kind == "heartbeat_round_trips" || kind == "node_startup") return;
  events_.push_back(event);
  if (events_.size() > limits_.kept_lines) events_.pop_front();
  if (kind == "node_lost") mark_node_lost(event.value("node", std::string()));
  if (event.contains("generation") && event["generation"].is_number_integer() && event["generation"].get<int64_t>() > 0)
    generation_ = std::max(generation_, event["generation"].get<uint64_t>());
  ++version_;
}

void metrics_store::add_log(const messages::log_line& line) {
  log_.push_back(line);
  if (log_.size() > limits_.kept_lines) log_.pop_front();
  ++version_;
}

void metrics_store::note_malformed_batch(const std::string& reason, double now) {
  ++totals_.malformed_batches;
  add_log({now, "warning", "metrics hub: dropped a malformed batch: " + reason});
}

void metrics_store::mark_node_lost(const std::string& node) {
  auto found = nodes_.find(node);
  if (found != nodes_.end()) found->second.state = "lost";
  ++version_;
}

// The straggler rule (io/monitor/straggler_rule.hpp): by compute lateness or by link time.
void metrics_store::name_straggler(window_summary& window) {
  const auto named = straggler_rule_.observe(window);
  if (!named) return;
  window.straggler = named_straggler{named->rank, named->reason, named->seconds, straggler_rule_.run()};
  if (straggler_rule_.just_named()) straggler_warnings_.push_back(straggler_text(*named, window, straggler_rule_.run()));
}

nlohmann::json metrics_store::state_json(double now) const {
  nlohmann::json state;
  state["job"] = {{"name", job_.name},          {"run_dir", job_.run_dir},
                  {"total_steps", job_.total_steps}, {"world_size", job_.world_size},
                  {"started_unix_s", job_.started_unix_seconds}, {"finished", finished_},
                  {"config", job_.config},       {"generation", generation_}};
  const int64_t step = last_step();
  const double elapsed = recent_.empty() ? 0.0 : recent_.back().unix_seconds - job_.started_unix_seconds;
  double rate = 0;  // windows per second over the recent windows
  if (recent_.size() >= 2) {
    const double span = recent_.back().unix_seconds - recent_.front().unix_seconds;
    rate = per_second(static_cast<double>(recent_.back().step - recent_.front().step), span);
  }
  const double samples_per_s =
      recent_.empty() ? 0.0
                      : per_second(static_cast<double>(recent_.back().first().samples), recent_.back().first().window_seconds);
  state["progress"] = {{"step", step},
                       {"total_steps", job_.total_steps},
                       {"elapsed_s", std::max(elapsed, 0.0)},
                       {"eta_s", rate > 0 ? nlohmann::json(static_cast<double>(job_.total_steps - step) / rate) : nlohmann::json()},
                       {"samples_per_s", samples_per_s}};
  state["latest"] = recent_.empty() ? nlohmann::json() : window_json(recent_.back());
  const auto bound = static_cast<std::size_t>(std::max<int64_t>(limits_.detail.every_rank_up_to, 0));
  state["nodes"] = nodes_json(now, bound);
  nlohmann::json node_states = {{"training", 0}, {"finished", 0}, {"lost", 0}};
  for (const auto& [name, node] : nodes_) node_states[shown_state(node)] = node_states.value(shown_state(node), 0) + 1;
  state["node_states"] = std::move(node_states);
  state["nodes_total"] = nodes_.size();
  nlohmann::json workers = nlohmann::json::array();
  const auto named = straggler_rule_.named();
  const int32_t straggler = named ? named->rank : -1;
  if (!recent_.empty())
    for (const auto& r : recent_.back().ranks) {  // a large job's: the lowest, the straggler, the slowest
      auto worker = rank_json(r);
      worker.erase("time");
      worker["straggler"] = r.report.rank == straggler;
      workers.push_back(std::move(worker));
    }
  state["workers"] = std::move(workers);
  state["workers_total"] = recent_.empty() ? 0 : statistics_of(recent_.back()).ranks;
  state["straggler"] = named ? nlohmann::json{{"rank", named->rank},
                                             {"windows", straggler_rule_.run()},
                                             {"reason", named->reason},
                                             {"seconds", named->seconds}}
                            : nlohmann::json();
  nlohmann::json checkpoints = nlohmann::json::array();
  for (const auto& c : checkpoints_)
    checkpoints.push_back({{"step", c.step},
                           {"unix_s", c.unix_seconds > 0 ? nlohmann::json(c.unix_seconds) : nlohmann::json()},
                           {"seconds", c.unix_seconds > 0 ? nlohmann::json(c.seconds) : nlohmann::json()},
                           {"bytes", c.bytes},
                           {"skipped", c.skipped}});
  state["checkpoints"] = std::move(checkpoints);
  state["events"] = events_;
  nlohmann::json log = nlohmann::json::array();
  for (const auto& line : log_) log.push_back({{"unix_s", line.unix_seconds}, {"level", line.level}, {"text", line.text}});
  state["log"] = std::move(log);
  int64_t dropped = 0;
  for (const auto& [name, node] : nodes_) dropped += node.dropped;
  state["metrics"] = {{"dropped", dropped}, {"malformed", totals_.malformed_batches}, {"late", totals_.late_reports}};
  return state;
}

const char* metrics_store::shown_state(const node_status& node) const {
  return finished_ && node.state == "training" ? "finished" : node.state.c_str();
}

// A large job's table shows the nodes worth a look first: lost ones, then those whose last
// report is oldest.
std::vector<std::pair<const std::string*, const metrics_store::node_status*>> metrics_store::nodes_worth_a_look(
    std::size_t most) const {
  std::vector<std::pair<const std::string*, const node_status*>> shown;
  for (const auto& [name, node] : nodes_) shown.emplace_back(&name, &node);
  if (shown.size() <= most) return shown;
  std::stable_sort(shown.begin(), shown.end(), [](const auto& a, const auto& b) {
    const bool a_lost = a.second->state == "lost", b_lost = b.second->state == "lost";
    return a_lost != b_lost ? a_lost : a.second->last_seen < b.second->last_seen;
  });
  shown.resize(most);
  return shown;
}

nlohmann::json metrics_store::nodes_json(double now, std::size_t most) const {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& [name, node] : nodes_worth_a_look(most))
    nodes.push_back({{"name", *name},
                     {"state", shown_state(*node)},
                     {"generation", node->generation},
                     {"ranks", node->ranks},
                     // unknown (null) for a run read back from its files
                     {"rss_bytes", node->resident_bytes > 0 ? nlohmann::json(node->resident_bytes) : nlohmann::json()},
                     {"last_seen_unix_s", node->last_seen > 0 ? nlohmann::json(node->last_seen) : nlohmann::json()},
                     {"last_seen_s_ago", node->last_seen > 0 ? nlohmann::json(now - node->last_seen) : nlohmann::json()},
                     {"metrics_dropped", node->dropped},
                     {"heartbeat_p50_ms", node->heartbeats.count > 0 ? nlohmann::json(node->heartbeats.p50_ms) : nlohmann::json()},
                     {"heartbeat_p99_ms", node->heartbeats.count > 0 ? nlohmann::json(node->heartbeats.p99_ms) : nlohmann::json()}});
  return nodes;
}

nlohmann::json metrics_store::series_json() const {
  auto with_bucket = [&](const std::vector<double>& done, const std::vector<double>& partial, bool last) {
    auto values = done;
    if (!partial.empty()) {
      double sum = 0;
      for (double v : partial) sum += v;
      values.push_back(last ? partial.back() : sum / static_cast<double>(partial.size()));
    }
    return values;
  };
  nlohmann::json eval_step = nlohmann::json::array(), eval_perplexity = nlohmann::json::array();
  for (const auto& [step, perplexity] : evaluations_) {
    eval_step.push_back(step);
    eval_perplexity.push_back(perplexity);
  }
  nlohmann::json task_step = nlohmann::json::array(), task_loss = nlohmann::json::array(),
                 task_accuracy = nlohmann::json::array();
  for (const auto& [step, evaluation] : task_evaluations_) {
    task_step.push_back(step);
    task_loss.push_back(evaluation.loss);
    task_accuracy.push_back(evaluation.accuracy);
  }
  return {{"step", with_bucket(series_.step, bucket_.step, true)},
          {"loss", with_bucket(series_.loss, bucket_.loss, false)},
          {"perplexity", with_bucket(series_.perplexity, bucket_.perplexity, false)},
          {"samples_per_s", with_bucket(series_.samples_per_s, bucket_.samples_per_s, false)},
          {"tokens_per_s", with_bucket(series_.tokens_per_s, bucket_.tokens_per_s, false)},
          {"windows_per_point", stride_},
          {"eval_step", eval_step},
          {"eval_perplexity", eval_perplexity},
          {"eval_task_step", task_step},
          {"eval_loss", task_loss},
          {"eval_accuracy", task_accuracy}};
}

nlohmann::json metrics_store::windows_json(std::size_t last) const {
  nlohmann::json windows = nlohmann::json::array();
  const std::size_t from = recent_.size() > last ? recent_.size() - last : 0;
  for (std::size_t i = from; i < recent_.size(); ++i) windows.push_back(window_json(recent_[i]));
  return {{"windows", windows}};
}

}  // namespace troupe::io
