#include "io/monitor/metrics_store.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "io/monitor/prometheus_text.hpp"
#include "io/os/file_util.hpp"

namespace troupe::io {
namespace {

const std::vector<double> window_bounds = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
const std::vector<double> checkpoint_bounds = {0.1, 0.5, 1, 5, 10, 30, 60, 300};

// The phases of a rank's window, as the page and /metrics name them.
const char* const phases[] = {"data_wait", "forward", "backward", "allreduce", "optimizer", "checkpoint", "eval"};

double phase_seconds(const messages::window_report& r, std::size_t phase) {
  const double values[] = {r.data_wait_seconds, r.forward_seconds, r.backward_seconds,
                           r.allreduce_seconds, r.optimizer_seconds, r.checkpoint_stall_seconds, r.eval_seconds};
  return values[phase];
}

double per_second(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0.0; }

double perplexity_of(double loss) { return std::exp(std::min(loss, 50.0)); }

uint64_t from_hex64(const std::string& text) { return std::strtoull(text.c_str(), nullptr, 16); }

void observe(std::vector<double>& buckets, const std::vector<double>& bounds, double value) {
  buckets.resize(bounds.size(), 0.0);
  for (std::size_t i = 0; i < bounds.size(); ++i)
    if (value <= bounds[i]) buckets[i] += 1;
}

// A ring's allreduce time is the least any rank waited for it: the others also waited for the
// ring's last rank to arrive. Its bus bandwidth is nccl-tests' busbw: the bytes each rank's
// slice holds over that time, times 2(n-1)/n, the share a ring allreduce moves over each link.
nlohmann::json rings_json(const window_summary& window) {
  nlohmann::json rings = nlohmann::json::array();
  const auto n = static_cast<double>(window.ranks.size());
  std::size_t count = 0;
  for (const auto& r : window.ranks) count = std::max(count, r.report.ring_seconds.size());
  for (std::size_t ring = 0; ring < count; ++ring) {
    double seconds = -1;
    int64_t bytes = 0;
    for (const auto& r : window.ranks) {
      if (ring >= r.report.ring_seconds.size()) continue;
      const double s = r.report.ring_seconds[ring];
      if (seconds < 0 || s < seconds) seconds = s;
      if (ring < r.report.ring_bytes.size()) bytes = std::max(bytes, r.report.ring_bytes[ring]);
    }
    const double bus = n > 1 ? per_second(static_cast<double>(bytes), seconds) * 2.0 * (n - 1) / n : 0.0;
    rings.push_back({{"ring", ring}, {"seconds", std::max(seconds, 0.0)}, {"bytes", bytes}, {"bus_gb_per_s", bus / 1e9}});
  }
  return rings;
}

nlohmann::json rank_json(const rank_report& r) {
  const auto& w = r.report;
  nlohmann::json time = nlohmann::json::object();
  for (std::size_t p = 0; p < std::size(phases); ++p) time[phases[p]] = phase_seconds(w, p);
  const double share = w.world_size > 0 ? static_cast<double>(w.samples) / w.world_size : 0.0;
  return {{"rank", w.rank},
          {"node", r.node},
          {"window_s", w.window_seconds},
          {"samples_per_s", per_second(share, w.window_seconds)},
          {"lateness_s", w.lateness_seconds},
          {"time", time},
          {"ring_s", w.ring_seconds},
          {"ring_bytes", w.ring_bytes}};
}

}  // namespace

nlohmann::json window_json(const window_summary& window) {
  const auto& r = window.first();
  nlohmann::json line = {{"step", window.step},
                         {"unix_s", window.unix_seconds},
                         {"loss", r.loss},
                         {"perplexity", perplexity_of(r.loss)},
                         {"lr", r.lr},
                         {"grad_norm", r.grad_norm},
                         {"samples", r.samples},
                         {"tokens", r.tokens},
                         {"masked_tokens", r.masked_tokens},
                         {"samples_per_s", per_second(static_cast<double>(r.samples), r.window_seconds)},
                         {"tokens_per_s", per_second(static_cast<double>(r.tokens), r.window_seconds)},
                         {"window_s", r.window_seconds},
                         {"rank", r.rank},
                         {"time_data_wait_s", r.data_wait_seconds},
                         {"time_forward_s", r.forward_seconds},
                         {"time_backward_s", r.backward_seconds},
                         {"time_optimizer_s", r.optimizer_seconds},
                         {"time_allreduce_s", r.allreduce_seconds},
                         {"epoch", r.epoch},
                         {"next_position", r.next_position},
                         {"checkpoint_stall_s", r.checkpoint_stall_seconds},
                         {"checkpoints_skipped", r.checkpoints_skipped},
                         {"parameter_hash", hex64(r.parameter_hash)},
                         {"world_size", r.world_size},
                         {"straggler_rank", r.straggler_rank},
                         {"straggler_lateness_s", r.straggler_lateness_seconds},
                         {"reported_ranks", window.ranks.size()}};
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& rank : window.ranks) ranks.push_back(rank_json(rank));
  line["ranks"] = std::move(ranks);
  line["rings"] = rings_json(window);
  if (window.eval_perplexity) line["eval_perplexity"] = *window.eval_perplexity;
  return line;
}

window_summary window_from_json(const nlohmann::json& line) {
  window_summary window;
  window.step = line.at("step").get<int64_t>();
  window.unix_seconds = line.value("unix_s", 0.0);
  if (line.contains("eval_perplexity")) window.eval_perplexity = line["eval_perplexity"].get<double>();
  messages::window_report cluster;
  cluster.step = window.step;
  cluster.loss = line.value("loss", 0.0);
  cluster.lr = line.value("lr", 0.0);
  cluster.grad_norm = line.value("grad_norm", 0.0);
  cluster.samples = line.value("samples", int64_t{0});
  cluster.tokens = line.value("tokens", int64_t{0});
  cluster.masked_tokens = line.value("masked_tokens", int64_t{0});
  cluster.epoch = line.value("epoch", uint64_t{0});
  cluster.next_position = line.value("next_position", uint64_t{0});
  cluster.checkpoints_skipped = line.value("checkpoints_skipped", int64_t{0});
  cluster.parameter_hash = from_hex64(line.value("parameter_hash", std::string("0")));
  cluster.world_size = line.value("world_size", 1);
  cluster.straggler_rank = line.value("straggler_rank", 0);
  cluster.straggler_lateness_seconds = line.value("straggler_lateness_s", 0.0);
  const auto time_split = [](messages::window_report& r, const nlohmann::json& time) {
    r.data_wait_seconds = time.value("data_wait", 0.0);
    r.forward_seconds = time.value("forward", 0.0);
    r.backward_seconds = time.value("backward", 0.0);
    r.allreduce_seconds = time.value("allreduce", 0.0);
    r.optimizer_seconds = time.value("optimizer", 0.0);
    r.checkpoint_stall_seconds = time.value("checkpoint", 0.0);
    r.eval_seconds = time.value("eval", 0.0);
  };
  if (!line.contains("ranks")) {
    cluster.rank = line.value("rank", 0);
    cluster.window_seconds = line.value("window_s", 0.0);
    time_split(cluster, {{"data_wait", line.value("time_data_wait_s", 0.0)},
                         {"forward", line.value("time_forward_s", 0.0)},
                         {"backward", line.value("time_backward_s", 0.0)},
                         {"allreduce", line.value("time_allreduce_s", 0.0)},
                         {"optimizer", line.value("time_optimizer_s", 0.0)},
                         {"checkpoint", line.value("checkpoint_stall_s", 0.0)}});
    window.ranks.push_back({"", cluster});
    return window;
  }
  for (const auto& rank : line.at("ranks")) {
    auto r = cluster;
    r.rank = rank.value("rank", 0);
    r.window_seconds = rank.value("window_s", 0.0);
    r.lateness_seconds = rank.value("lateness_s", 0.0);
    time_split(r, rank.value("time", nlohmann::json::object()));
    r.ring_seconds = rank.value("ring_s", std::vector<double>{});
    r.ring_bytes = rank.value("ring_bytes", std::vector<int64_t>{});
    window.ranks.push_back({rank.value("node", std::string()), std::move(r)});
  }
  if (window.ranks.empty()) window.ranks.push_back({"", cluster});
  return window;
}

std::size_t drop_windows_from(const std::filesystem::path& jsonl, int64_t from) {
  std::ifstream in(jsonl);
  if (!in) return 0;
  std::string kept, line;
  std::size_t dropped = 0;
  while (std::getline(in, line)) {
    const auto parsed = nlohmann::json::parse(line, nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object() && parsed.contains("step") && parsed["step"].is_number_integer() &&
        parsed["step"].get<int64_t>() >= from) {
      ++dropped;
      continue;
    }
    kept += line + '\n';
  }
  if (dropped > 0) write_file_atomically(jsonl, kept);
  return dropped;
}

metrics_store::metrics_store(job_description job, store_limits limits) : job_(std::move(job)), limits_(limits) {
  totals_.window_seconds_buckets.assign(window_bounds.size(), 0.0);
  totals_.checkpoint_seconds_buckets.assign(checkpoint_bounds.size(), 0.0);
}

void metrics_store::add_batch(const messages::metrics_batch& batch, double now) {
  auto& node = nodes_[batch.node];
  node.generation = batch.generation;
  node.resident_bytes = batch.resident_bytes;
  node.last_seen = now;
  node.dropped = batch.dropped;
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
    if (at != ranks.end() && at->report.rank == report.rank)
      *at = {batch.node, report};  // a repeated report (a resent batch): the newer one
    else
      ranks.insert(at, {batch.node, report});
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
    // eval_every_windows: the ranks' shares of the held-out subset make one perplexity.
    double eval_sum = 0;
    int64_t eval_tokens = 0;
    for (const auto& r : pending.window.ranks) {
      eval_sum += r.report.eval_loss_sum;
      eval_tokens += r.report.eval_tokens;
    }
    if (eval_tokens > 0) pending.window.eval_perplexity = std::exp(eval_sum / static_cast<double>(eval_tokens));
    due.push_back(std::move(pending.window));
    pending_.erase(pending_.begin());
  }
  for (const auto& window : due) record(window);
  return due;
}

void metrics_store::add_written(window_summary window) {
  for (const auto& r : window.ranks)
    if (!r.node.empty()) {
      nodes_[r.node].ranks.insert(r.report.rank);
      node_of_rank_[r.report.rank] = r.node;
    }
  record(window);
}

// Everything a finished window adds: the recent list, the series, the /metrics totals.
void metrics_store::record(const window_summary& window) {
  last_written_step_ = std::max(last_written_step_, window.step);
  const auto& first = window.first();
  ++totals_.windows;
  totals_.samples += first.samples;
  observe(totals_.window_seconds_buckets, window_bounds, first.window_seconds);
  totals_.window_seconds_sum += first.window_seconds;
  for (const auto& r : window.ranks)
    for (std::size_t p = 0; p < std::size(phases); ++p)
      totals_.phase_seconds[{r.report.rank, phases[p]}] += phase_seconds(r.report, p);
  if (window.eval_perplexity) evaluations_.emplace_back(static_cast<double>(window.step), *window.eval_perplexity);
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
  bucket_.perplexity.push_back(perplexity_of(r.loss));
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
    observe(totals_.checkpoint_seconds_buckets, checkpoint_bounds, checkpoint.seconds);
    totals_.checkpoint_seconds_sum += checkpoint.seconds;
  }
  ++version_;
}

void metrics_store::add_event(const nlohmann::json& event) {
  events_.push_back(event);
  if (events_.size() > limits_.kept_lines) events_.pop_front();
  const auto kind = event.value("event", std::string());
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

void metrics_store::set_evaluation(int64_t step, double perplexity) {
  evaluations_.emplace_back(static_cast<double>(step), perplexity);
  for (auto& window : recent_)
    if (window.step == step) window.eval_perplexity = perplexity;
  ++version_;
}

// A straggler: the rank that finished its window's compute last. Being last once is noise (some
// rank always is); a rank that is late by more than a share of the window (a quarter by default),
// window after window, is slow (a busy host, a thermal-throttled core, a slow disk) and holds
// every other rank back.
std::optional<std::string> metrics_store::straggler_warning(const window_summary& window) {
  const auto& r = window.first();
  const bool late = r.world_size > 1 && r.straggler_lateness_seconds > limits_.straggler_share * r.window_seconds;
  if (!late) {
    straggler_run_ = 0;
    straggler_ = -1;
    return std::nullopt;
  }
  straggler_run_ = r.straggler_rank == straggler_ ? straggler_run_ + 1 : 1;
  straggler_ = r.straggler_rank;
  if (straggler_run_ != limits_.straggler_windows) return std::nullopt;
  char text[320];
  std::snprintf(text, sizeof text,
                "rank %d is a straggler: it finished its compute %.2f s after the first rank in a %.2f s window, "
                "%lld windows in a row (metrics.jsonl: straggler_rank, straggler_lateness_s)",
                r.straggler_rank, r.straggler_lateness_seconds, r.window_seconds,
                static_cast<long long>(straggler_run_));
  return std::string(text);
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
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& [name, node] : nodes_)
    nodes.push_back({{"name", name},
                     {"state", finished_ && node.state == "training" ? "finished" : node.state},
                     {"generation", node.generation},
                     {"ranks", node.ranks},
                     // unknown (null) for a run read back from its files
                     {"rss_bytes", node.resident_bytes > 0 ? nlohmann::json(node.resident_bytes) : nlohmann::json()},
                     {"last_seen_unix_s", node.last_seen > 0 ? nlohmann::json(node.last_seen) : nlohmann::json()},
                     {"last_seen_s_ago", node.last_seen > 0 ? nlohmann::json(now - node.last_seen) : nlohmann::json()},
                     {"metrics_dropped", node.dropped}});
  state["nodes"] = std::move(nodes);
  nlohmann::json workers = nlohmann::json::array();
  const int32_t straggler = straggler_run_ >= limits_.straggler_windows ? straggler_ : -1;
  if (!recent_.empty())
    for (const auto& r : recent_.back().ranks) {
      auto worker = rank_json(r);
      worker.erase("time");
      worker["straggler"] = r.report.rank == straggler;
      workers.push_back(std::move(worker));
    }
  state["workers"] = std::move(workers);
  state["straggler"] = straggler >= 0 ? nlohmann::json{{"rank", straggler}, {"windows", straggler_run_}} : nlohmann::json();
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
  return {{"step", with_bucket(series_.step, bucket_.step, true)},
          {"loss", with_bucket(series_.loss, bucket_.loss, false)},
          {"perplexity", with_bucket(series_.perplexity, bucket_.perplexity, false)},
          {"samples_per_s", with_bucket(series_.samples_per_s, bucket_.samples_per_s, false)},
          {"tokens_per_s", with_bucket(series_.tokens_per_s, bucket_.tokens_per_s, false)},
          {"windows_per_point", stride_},
          {"eval_step", eval_step},
          {"eval_perplexity", eval_perplexity}};
}

nlohmann::json metrics_store::windows_json(std::size_t last) const {
  nlohmann::json windows = nlohmann::json::array();
  const std::size_t from = recent_.size() > last ? recent_.size() - last : 0;
  for (std::size_t i = from; i < recent_.size(); ++i) windows.push_back(window_json(recent_[i]));
  return {{"windows", windows}};
}

std::string metrics_store::prometheus(double now) const {
  prometheus_text out;
  const auto gauge = [&](const std::string& name, const std::string& help, double value) {
    out.family(name, "gauge", help);
    out.sample({}, value);
  };
  const auto counter = [&](const std::string& name, const std::string& help, double value) {
    out.family(name, "counter", help);
    out.sample({}, value);
  };
  out.family("troupe_job_info", "gauge", "The job this hub reports on (always 1).");
  out.sample({{"run_dir", job_.run_dir}, {"job", job_.name}}, 1);
  gauge("troupe_job_finished", "1 once every node finished.", finished_ ? 1 : 0);
  gauge("troupe_total_steps", "Optimizer step the run ends at.", static_cast<double>(job_.total_steps));
  gauge("troupe_step", "Optimizer steps completed.", static_cast<double>(last_step()));
  gauge("troupe_membership_generation", "Membership generation (a lost or rejoined node starts a new one).",
        static_cast<double>(generation_));
  counter("troupe_windows_total", "Accumulation windows completed.", static_cast<double>(totals_.windows));
  counter("troupe_samples_total", "Training samples consumed by completed windows.", static_cast<double>(totals_.samples));
  out.family("troupe_window_seconds", "histogram", "Wall time of an accumulation window (compute, allreduce, step).");
  out.histogram({}, window_bounds, totals_.window_seconds_buckets, totals_.window_seconds_sum,
                static_cast<double>(totals_.windows));
  if (!recent_.empty()) {
    const auto& window = recent_.back();
    const auto& r = window.first();
    gauge("troupe_loss", "Masked-LM loss of the last window (sample-weighted over every rank).", r.loss);
    gauge("troupe_perplexity", "exp(loss) of the last window.", perplexity_of(r.loss));
    gauge("troupe_learning_rate", "Learning rate of the last optimizer step.", r.lr);
    gauge("troupe_grad_norm", "Global gradient norm of the last window, before clipping.", r.grad_norm);
    gauge("troupe_samples_per_second", "Cluster throughput over the last window.",
          per_second(static_cast<double>(r.samples), r.window_seconds));
    gauge("troupe_tokens_per_second", "Cluster throughput over the last window, real tokens.",
          per_second(static_cast<double>(r.tokens), r.window_seconds));
    gauge("troupe_straggler_rank", "The rank that finished the last window's compute last.", r.straggler_rank);
    const auto label = [&](const rank_report& rank) -> prometheus_labels {
      return {{"node", rank.node}, {"worker", std::to_string(rank.report.rank)}};
    };
    out.family("troupe_worker_samples_per_second", "gauge", "A worker's samples over its last window's wall time.");
    for (const auto& rank : window.ranks)
      out.sample(label(rank), per_second(static_cast<double>(rank.report.samples) / std::max(1, rank.report.world_size),
                                         rank.report.window_seconds));
    out.family("troupe_worker_lateness_seconds", "gauge",
               "How long after the first rank a worker finished the last window's compute.");
    for (const auto& rank : window.ranks) out.sample(label(rank), rank.report.lateness_seconds);
    out.family("troupe_worker_phase_seconds", "gauge", "A worker's last window split by phase.");
    for (const auto& rank : window.ranks)
      for (std::size_t p = 0; p < std::size(phases); ++p) {
        auto labels = label(rank);
        labels.emplace_back("phase", phases[p]);
        out.sample(labels, phase_seconds(rank.report, p));
      }
    const auto rings = rings_json(window);
    if (!rings.empty()) {
      out.family("troupe_ring_allreduce_seconds", "gauge", "A ring's allreduce of the last window (its fastest rank).");
      for (const auto& ring : rings) out.sample({{"ring", std::to_string(ring["ring"].get<int>())}}, ring["seconds"]);
      out.family("troupe_ring_bus_bytes_per_second", "gauge",
                 "A ring's bus bandwidth in the last window (bytes x 2(n-1)/n over its time, as nccl-tests).");
      for (const auto& ring : rings)
        out.sample({{"ring", std::to_string(ring["ring"].get<int>())}}, ring["bus_gb_per_s"].get<double>() * 1e9);
    }
  }
  if (!totals_.phase_seconds.empty()) {
    out.family("troupe_worker_phase_seconds_total", "counter", "A worker's time by phase over the run.");
    for (const auto& [key, seconds] : totals_.phase_seconds) {
      auto node = node_of_rank_.find(key.first);
      out.sample({{"node", node == node_of_rank_.end() ? "" : node->second},
                  {"worker", std::to_string(key.first)},
                  {"phase", key.second}},
                 seconds);
    }
  }
  if (!evaluations_.empty())
    gauge("troupe_eval_perplexity", "Held-out perplexity of the last periodic evaluation.", evaluations_.back().second);
  if (!nodes_.empty()) {
    out.family("troupe_node_up", "gauge", "1 while a node is a member (training or finished), 0 once lost.");
    for (const auto& [name, node] : nodes_) out.sample({{"node", name}}, node.state == "lost" ? 0 : 1);
    out.family("troupe_node_resident_memory_bytes", "gauge", "Resident set size of a node's process.");
    for (const auto& [name, node] : nodes_) out.sample({{"node", name}}, static_cast<double>(node.resident_bytes));
    out.family("troupe_node_last_report_age_seconds", "gauge", "Seconds since a node's last metrics batch.");
    for (const auto& [name, node] : nodes_) out.sample({{"node", name}}, std::max(0.0, now - node.last_seen));
    out.family("troupe_metrics_dropped_total", "counter", "Reports a node's bounded metrics queue dropped.");
    for (const auto& [name, node] : nodes_) out.sample({{"node", name}}, static_cast<double>(node.dropped));
  }
  counter("troupe_metrics_malformed_batches_total", "Metrics batches the hub could not decode and dropped.",
          static_cast<double>(totals_.malformed_batches));
  counter("troupe_metrics_late_reports_total", "Window reports that reached the hub after their window was written.",
          static_cast<double>(totals_.late_reports));
  out.family("troupe_checkpoints_total", "counter", "Checkpoints written or skipped (checkpoint.when_busy = skip).");
  out.sample({{"result", "written"}}, static_cast<double>(totals_.checkpoints_written));
  out.sample({{"result", "skipped"}}, static_cast<double>(totals_.checkpoints_skipped));
  out.family("troupe_checkpoint_seconds", "histogram", "Time to write a checkpoint, request to rename.");
  out.histogram({}, checkpoint_bounds, totals_.checkpoint_seconds_buckets, totals_.checkpoint_seconds_sum,
                static_cast<double>(totals_.checkpoints_written));
  if (!checkpoints_.empty())
    gauge("troupe_checkpoint_last_bytes", "Size of the last checkpoint written.",
          static_cast<double>(checkpoints_.back().bytes));
  return out.text();
}

}  // namespace troupe::io
