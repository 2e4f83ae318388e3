#pragma once
/// One window as metrics.jsonl holds it: every rank's report, the cluster's numbers, the JSON
/// line the hub writes and the page reads, and the helpers the store and /metrics share.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/monitor/rank_statistics.hpp"
#include "messages/metrics_batch.hpp"
#include "messages/window_report.hpp"

namespace troupe::io {

/// One rank's report of a window and the node it ran on.
struct rank_report {
  std::string node;
  messages::window_report report;
  /// The rank's link to its successor in each ring, as its node last reported them.
  std::vector<messages::ring_link> links;
};

/// The straggler rule's verdict on a window (io/monitor/straggler_rule.hpp): the rank named, why
/// ("compute" or "link"), by how many seconds, and how many windows in a row.
struct named_straggler {
  int32_t rank = -1;
  std::string reason;
  double seconds = 0;
  int64_t windows = 0;
};

/// Fine-tuning's periodic held-out evaluation, every rank's share together.
struct task_evaluation {
  double loss = 0;      ///< HF's per-example task loss, averaged over the examples
  double accuracy = 0;  ///< share of the examples the head got right (question answering: start and end)
  int64_t examples = 0;
};

/// The nodes' heartbeat round trips to the head as their latest batches reported them (each
/// node's since its previous batch): the median node's p50, the worst node's p99 and max.
struct heartbeat_summary {
  int64_t nodes = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  std::string worst_node;  ///< the node of the highest p99
};

/// One window, cluster-wide: what every rank reported for one optimizer step. The cluster's
/// numbers (loss, lr, samples, the straggler) come from the allreduced window statistics, so
/// every rank reports the same; the time split is each rank's own.
struct window_summary {
  int64_t step = 0;
  double unix_seconds = 0;          ///< when the first report of it reached the hub
  std::vector<rank_report> ranks;   ///< by rank
  std::optional<double> eval_perplexity;
  std::optional<task_evaluation> eval_task;  ///< fine-tuning's eval_every_windows
  std::optional<named_straggler> straggler;  ///< set by the hub when a straggler is named
  std::optional<heartbeat_summary> heartbeats;  ///< a cluster job's (set by the hub)
  /// Set when `ranks` lists only some of the window's ranks (io/monitor/rank_detail.hpp): the
  /// statistics over all of them, and `rings` as computed from all of them.
  std::optional<rank_statistics> statistics;
  nlohmann::json rings;  ///< null: computed from `ranks`
  /// The lowest rank's report (the cluster's numbers are the same in every rank's).
  const messages::window_report& first() const { return ranks.front().report; }
};

/// metrics.jsonl's line and the API's window object: the cluster numbers at the top level (as
/// before every rank reported), "ranks" with each rank's time split and "rings" with each ring's
/// allreduce time and bus bandwidth.
nlohmann::json window_json(const window_summary& window);
/// Reads a metrics.jsonl line back (lines written before "ranks" existed give one rank).
window_summary window_from_json(const nlohmann::json& line);

/// Rewrites a metrics.jsonl without its lines of step `from` and later (a resumed run reports
/// those windows again; TensorBoard purges orphaned steps the same way). Lines that are not
/// JSON with a step are kept, except a last line cut short (no newline, not JSON: its writer
/// died mid-line, as a head killed before its role moved); a whole last line missing only its
/// newline gets one. Atomic (temporary file, rename); returns what it dropped.
struct dropped_lines {
  std::size_t windows = 0;  ///< lines of step `from` and later
  bool torn = false;        ///< the last line, cut short
};
dropped_lines drop_windows_from(const std::filesystem::path& jsonl, int64_t from);

/// The step of a metrics.jsonl's last window line (read from the file's end; a last line cut
/// short does not count); 0 for a file that is absent or has none.
int64_t last_window_step(const std::filesystem::path& jsonl);

/// A rank's seconds in window_phases[phase].
double phase_seconds(const messages::window_report& report, std::size_t phase);
/// `amount` per second of `seconds` (0 for no time).
double per_second(double amount, double seconds);
/// exp(loss), capped so a diverged run does not print inf.
double perplexity_of(double loss);
/// A window's training perplexity: of its masked-LM loss (a distillation window's mlm part,
/// not its weighted total; an SOP window's without the sentence-order loss).
double training_perplexity(const messages::window_report& report);
/// Each ring's time (its fastest rank's), bus bandwidth, and the transports its links used
/// ("transports": "tcp/eth0", … once each) in the window.
nlohmann::json rings_json(const window_summary& window);
/// The window's rings: as kept when it was bounded (from all its ranks), else rings_json.
nlohmann::json window_rings(const window_summary& window);
/// One rank's part of the window: node, window_s, samples/s, lateness, time split, rings, and
/// its ring links ("links": ring, peer, transport, device).
nlohmann::json rank_json(const rank_report& rank);

}  // namespace troupe::io
