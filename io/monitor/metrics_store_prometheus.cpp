// /metrics: the store as a Prometheus exposition (the families are listed in docs/monitoring.md).
#include <algorithm>

#include "io/monitor/metrics_store.hpp"
#include "io/monitor/prometheus_text.hpp"
#include "messages/window_report_fields.hpp"

namespace troupe::io {

namespace {

void gauge(prometheus_text& out, const std::string& name, const std::string& help, double value) {
  out.family(name, "gauge", help);
  out.sample({}, value);
}

void counter(prometheus_text& out, const std::string& name, const std::string& help, double value) {
  out.family(name, "counter", help);
  out.sample({}, value);
}

/// The last window over all workers: min, p50, p99, max and mean of each quantity.
void rank_statistics_families(prometheus_text& out, const rank_statistics& statistics) {
  const auto samples = [&](const rank_spread& s, prometheus_labels labels) {
    const std::pair<const char*, double> stats[] = {{"min", s.min}, {"p50", s.p50}, {"p99", s.p99}, {"max", s.max},
                                                    {"mean", s.mean}};
    for (const auto& [name, value] : stats) {
      auto with_stat = labels;
      with_stat.emplace_back("stat", name);
      out.sample(with_stat, value);
    }
  };
  out.family("troupe_workers_window_seconds", "gauge", "The last window's wall time over all workers (stat: min, p50, p99, max, mean).");
  samples(statistics.window_s, {});
  out.family("troupe_workers_lateness_seconds", "gauge",
             "How long after the first worker each finished the last window's compute, over all workers.");
  samples(statistics.lateness_s, {});
  out.family("troupe_workers_samples_per_second", "gauge", "Each worker's samples/s in the last window, over all workers.");
  samples(statistics.samples_per_s, {});
  out.family("troupe_workers_phase_seconds", "gauge", "The last window's split by phase, over all workers.");
  for (std::size_t p = 0; p < phase_count; ++p) samples(statistics.time[p], {{"phase", window_phases[p]}});
}

}  // namespace

std::string metrics_store::prometheus(double now) const {
  prometheus_text out;
  out.family("troupe_job_info", "gauge", "The job this hub reports on (always 1).");
  out.sample({{"run_dir", job_.run_dir}, {"job", job_.name}}, 1);
  gauge(out, "troupe_job_finished", "1 once every node finished.", finished_ ? 1 : 0);
  gauge(out, "troupe_total_steps", "Optimizer step the run ends at.", static_cast<double>(job_.total_steps));
  gauge(out, "troupe_step", "Optimizer steps completed.", static_cast<double>(last_step()));
  gauge(out, "troupe_membership_generation", "Membership generation (a lost or rejoined node starts a new one).",
        static_cast<double>(generation_));
  counter(out, "troupe_windows_total", "Accumulation windows completed.", static_cast<double>(totals_.windows));
  counter(out, "troupe_samples_total", "Training samples consumed by completed windows.", static_cast<double>(totals_.samples));
  out.family("troupe_window_seconds", "histogram", "Wall time of an accumulation window (compute, allreduce, step).");
  out.histogram({}, window_seconds_bounds(), totals_.window_seconds_buckets, totals_.window_seconds_sum,
                static_cast<double>(totals_.windows));
  if (!recent_.empty()) prometheus_last_window(out);
  if (totals_.windows > 0) {
    out.family("troupe_phase_seconds_total", "counter", "Every worker's time by phase over the run, summed.");
    for (std::size_t p = 0; p < phase_count; ++p) out.sample({{"phase", window_phases[p]}}, totals_.phase_seconds_all[p]);
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
    gauge(out, "troupe_eval_perplexity", "Held-out perplexity of the last periodic evaluation.", evaluations_.back().second);
  if (!task_evaluations_.empty()) {
    const auto& last = task_evaluations_.back().second;
    gauge(out, "troupe_eval_loss", "Fine-tuning: held-out task loss of the last periodic evaluation.", last.loss);
    gauge(out, "troupe_eval_accuracy", "Fine-tuning: held-out accuracy of the last periodic evaluation.", last.accuracy);
  }
  if (!nodes_.empty()) prometheus_nodes(out, now);
  counter(out, "troupe_metrics_malformed_batches_total", "Metrics batches the hub could not decode and dropped.",
          static_cast<double>(totals_.malformed_batches));
  counter(out, "troupe_metrics_late_reports_total", "Window reports that reached the hub after their window was written.",
          static_cast<double>(totals_.late_reports));
  out.family("troupe_checkpoints_total", "counter", "Checkpoints written or skipped (checkpoint.when_busy = skip).");
  out.sample({{"result", "written"}}, static_cast<double>(totals_.checkpoints_written));
  out.sample({{"result", "skipped"}}, static_cast<double>(totals_.checkpoints_skipped));
  out.family("troupe_checkpoint_seconds", "histogram", "Time to write a checkpoint, request to rename.");
  out.histogram({}, checkpoint_seconds_bounds(), totals_.checkpoint_seconds_buckets, totals_.checkpoint_seconds_sum,
                static_cast<double>(totals_.checkpoints_written));
  if (!checkpoints_.empty())
    gauge(out, "troupe_checkpoint_last_bytes", "Size of the last checkpoint written.",
          static_cast<double>(checkpoints_.back().bytes));
  return out.text();
}

/// The families of the newest window: the cluster's numbers, then each worker's and ring's.
void metrics_store::prometheus_last_window(prometheus_text& out) const {
  const auto& window = recent_.back();
  const auto& r = window.first();
  for (const auto& field : messages::window_report_fields())  // the report's own gauges
    if (field.prometheus != nullptr && messages::shows(field.shown, r))
      gauge(out, field.prometheus, field.help, *messages::numeric_value(r, field));
  gauge(out, "troupe_perplexity", "exp(masked-LM loss) of the last window.", training_perplexity(r));
  if (r.loss_scale > 0)
    counter(out, "troupe_skipped_steps_total", "fp16: windows whose optimizer step a gradient overflow skipped.",
            static_cast<double>(totals_.skipped_steps));
  gauge(out, "troupe_samples_per_second", "Cluster throughput over the last window.",
        per_second(static_cast<double>(r.samples), r.window_seconds));
  gauge(out, "troupe_tokens_per_second", "Cluster throughput over the last window, real tokens.",
        per_second(static_cast<double>(r.tokens), r.window_seconds));
  const auto label = [&](const rank_report& rank) -> prometheus_labels {
    return {{"node", rank.node}, {"worker", std::to_string(rank.report.rank)}};
  };
  // Every worker while the job is small; the lowest, the straggler and the slowest when it is
  // not (io/monitor/rank_detail.hpp): the statistics above cover them all.
  out.family("troupe_worker_samples_per_second", "gauge", "A worker's samples over its last window's wall time.");
  for (const auto& rank : window.ranks)
    out.sample(label(rank), per_second(static_cast<double>(rank.report.samples) / std::max(1, rank.report.world_size),
                                       rank.report.window_seconds));
  out.family("troupe_worker_lateness_seconds", "gauge",
             "How long after the first rank a worker finished the last window's compute.");
  for (const auto& rank : window.ranks) out.sample(label(rank), rank.report.lateness_seconds);
  out.family("troupe_worker_phase_seconds", "gauge", "A worker's last window split by phase.");
  for (const auto& rank : window.ranks)
    for (std::size_t p = 0; p < std::size(window_phases); ++p) {
      auto labels = label(rank);
      labels.emplace_back("phase", window_phases[p]);
      out.sample(labels, phase_seconds(rank.report, p));
    }
  rank_statistics_families(out, statistics_of(window));
  if (window.heartbeats) {
    out.family("troupe_heartbeat_round_trip_seconds", "gauge",
               "Heartbeat round trips to the head as the nodes last reported them: the median node's p50, the worst node's p99 and max.");
    out.sample({{"stat", "p50"}}, window.heartbeats->p50_ms / 1e3);
    out.sample({{"stat", "p99"}}, window.heartbeats->p99_ms / 1e3);
    out.sample({{"stat", "max"}}, window.heartbeats->max_ms / 1e3);
  }
  const auto rings = window_rings(window);
  if (!rings.empty()) {
    out.family("troupe_ring_allreduce_seconds", "gauge", "A ring's allreduce of the last window (its fastest rank).");
    for (const auto& ring : rings) out.sample({{"ring", std::to_string(ring["ring"].get<int>())}}, ring["seconds"]);
    out.family("troupe_ring_bus_bytes_per_second", "gauge",
               "A ring's bus bandwidth in the last window (bytes x 2(n-1)/n over its time, as nccl-tests).");
    for (const auto& ring : rings)
      out.sample({{"ring", std::to_string(ring["ring"].get<int>())}}, ring["bus_gb_per_s"].get<double>() * 1e9);
  }
}

/// Counts of nodes by state, then one sample per node for each node family: every node while
/// the job is small, else the ones worth a look (lost, last heard from longest ago).
void metrics_store::prometheus_nodes(prometheus_text& out, double now) const {
  std::map<std::string, int64_t> states = {{"training", 0}, {"finished", 0}, {"lost", 0}};
  for (const auto& [name, node] : nodes_) ++states[shown_state(node)];
  out.family("troupe_nodes", "gauge", "Nodes by state (training, finished, lost).");
  for (const auto& [state, count] : states) out.sample({{"state", state}}, static_cast<double>(count));
  const auto shown = nodes_worth_a_look(static_cast<std::size_t>(std::max<int64_t>(limits_.detail.every_rank_up_to, 0)));
  out.family("troupe_node_up", "gauge", "1 while a node is a member (training or finished), 0 once lost.");
  for (const auto& [name, node] : shown) out.sample({{"node", *name}}, node->state == "lost" ? 0 : 1);
  out.family("troupe_node_resident_memory_bytes", "gauge", "Resident set size of a node's process.");
  for (const auto& [name, node] : shown) out.sample({{"node", *name}}, static_cast<double>(node->resident_bytes));
  out.family("troupe_node_last_report_age_seconds", "gauge", "Seconds since a node's last metrics batch.");
  for (const auto& [name, node] : shown) out.sample({{"node", *name}}, std::max(0.0, now - node->last_seen));
  out.family("troupe_node_heartbeat_round_trip_seconds", "gauge",
             "A node's heartbeat round trips to the head since its previous metrics batch (stat: p50, p99).");
  for (const auto& [name, node] : shown)
    if (node->heartbeats.count > 0) {
      out.sample({{"node", *name}, {"stat", "p50"}}, node->heartbeats.p50_ms / 1e3);
      out.sample({{"node", *name}, {"stat", "p99"}}, node->heartbeats.p99_ms / 1e3);
    }
  out.family("troupe_metrics_dropped_total", "counter", "Reports a node's bounded metrics queue dropped.");
  for (const auto& [name, node] : shown) out.sample({{"node", *name}}, static_cast<double>(node->dropped));
}

}  // namespace troupe::io
