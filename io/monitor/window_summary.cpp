#include "io/monitor/window_summary.hpp"

#include <limits>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string_view>

#include "io/monitor/link_times.hpp"
#include "io/os/file_util.hpp"
#include "messages/window_report_fields.hpp"

namespace troupe::io {
namespace {

uint64_t from_hex64(const std::string& text) { return std::strtoull(text.c_str(), nullptr, 16); }

std::string route_text(const messages::ring_link& link) {
  return link.transport + (link.device.empty() ? "" : "/" + link.device);
}

// What ring `ring`'s links used in the window, each once ("tcp/eth0", "sysv/memory").
std::vector<std::string> ring_transports(const window_summary& window, int32_t ring) {
  std::vector<std::string> routes;
  for (const auto& r : window.ranks)
    for (const auto& link : r.links)
      if (link.ring == ring && std::find(routes.begin(), routes.end(), route_text(link)) == routes.end())
        routes.push_back(route_text(link));
  return routes;
}

nlohmann::json links_json(const std::vector<messages::ring_link>& links) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& link : links)
    list.push_back({{"ring", link.ring}, {"peer", link.peer}, {"transport", link.transport}, {"device", link.device}});
  return list;
}

std::vector<messages::ring_link> links_from_json(const nlohmann::json& list, int32_t rank) {
  std::vector<messages::ring_link> links;
  if (!list.is_array()) return links;
  for (const auto& link : list)
    links.push_back({link.value("ring", 0), rank, link.value("peer", 0), link.value("transport", std::string()),
                     link.value("device", std::string())});
  return links;
}

}  // namespace

double phase_seconds(const messages::window_report& r, std::size_t phase) {
  const double values[] = {r.data_wait_seconds, r.forward_seconds, r.backward_seconds,
                           r.exposed_comm_seconds, r.optimizer_seconds, r.checkpoint_stall_seconds, r.eval_seconds,
                           r.teacher_seconds};
  return values[phase];
}

double per_second(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0.0; }

double perplexity_of(double loss) { return std::exp(std::min(loss, 50.0)); }

double training_perplexity(const messages::window_report& r) {
  return perplexity_of(r.distilled || r.sentence_order ? r.loss_mlm : r.loss);
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
    rings.push_back({{"ring", ring}, {"seconds", std::max(seconds, 0.0)}, {"bytes", bytes}, {"bus_gb_per_s", bus / 1e9},
                     {"transports", ring_transports(window, static_cast<int32_t>(ring))},
                     {"link_s", nlohmann::json::array()}});
  }
  for (const auto& link : link_times(window))
    if (static_cast<std::size_t>(link.ring) < rings.size())
      rings[static_cast<std::size_t>(link.ring)]["link_s"].push_back(
          {{"from", link.from}, {"to", link.to}, {"seconds", link.seconds}});
  return rings;
}

nlohmann::json window_rings(const window_summary& window) {
  return window.rings.is_null() ? rings_json(window) : window.rings;
}

nlohmann::json rank_json(const rank_report& r) {
  const auto& w = r.report;
  nlohmann::json time = nlohmann::json::object();
  for (std::size_t p = 0; p < std::size(window_phases); ++p) time[window_phases[p]] = phase_seconds(w, p);
  const double share = w.world_size > 0 ? static_cast<double>(w.samples) / w.world_size : 0.0;
  return {{"rank", w.rank},
          {"node", r.node},
          {"window_s", w.window_seconds},
          {"samples_per_s", per_second(share, w.window_seconds)},
          {"lateness_s", w.lateness_seconds},
          {"time", time},
          {"ring_s", w.ring_seconds},
          {"ring_bytes", w.ring_bytes},
          {"ring_sent_bytes", w.ring_sent_bytes},
          {"links", links_json(r.links)},
          {"ring_link_units", w.ring_link_units},
          {"ring_send_posted_unix", w.ring_send_posted_unix},
          {"ring_receive_done_unix", w.ring_receive_done_unix},
          {"ring_receive_posted_unix", w.ring_receive_posted_unix}};
}


nlohmann::json window_json(const window_summary& window) {
  const auto& r = window.first();
  nlohmann::json line = {{"step", window.step},
                         {"unix_s", window.unix_seconds},
                         {"perplexity", training_perplexity(r)},
                         {"grad_norm", r.grad_norm},
                         {"samples_per_s", per_second(static_cast<double>(r.samples), r.window_seconds)},
                         {"tokens_per_s", per_second(static_cast<double>(r.tokens), r.window_seconds)},
                         {"parameter_hash", hex64(r.parameter_hash)},
                         {"reported_ranks", window.statistics ? window.statistics->ranks
                                                              : static_cast<int64_t>(window.ranks.size())}};
  for (const auto& field : messages::window_report_fields())  // the fields the line carries as they are
    if (field.json_key != nullptr) std::visit([&](auto member) { line[field.json_key] = r.*member; }, field.member);
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& rank : window.ranks) ranks.push_back(rank_json(rank));
  line["ranks"] = std::move(ranks);
  line["rings"] = window_rings(window);
  if (window.statistics) line["rank_stats"] = rank_statistics_json(*window.statistics);
  if (window.eval_perplexity) line["eval_perplexity"] = *window.eval_perplexity;
  if (window.eval_task) {  // HF Trainer's names
    line["eval_loss"] = window.eval_task->loss;
    line["eval_accuracy"] = window.eval_task->accuracy;
    line["eval_examples"] = window.eval_task->examples;
  }
  if (window.heartbeats)
    line["heartbeat_rtt_ms"] = {{"nodes", window.heartbeats->nodes}, {"p50", window.heartbeats->p50_ms},
                                {"p99", window.heartbeats->p99_ms}, {"max", window.heartbeats->max_ms},
                                {"worst_node", window.heartbeats->worst_node}};
  if (window.straggler)
    line["straggler"] = {{"rank", window.straggler->rank}, {"reason", window.straggler->reason},
                         {"seconds", window.straggler->seconds}, {"windows", window.straggler->windows}};
  if (r.distilled)
    line["loss_parts"] = {{"ce", r.loss_ce}, {"mlm", r.loss_mlm}, {"cos", r.loss_cos}, {"mse", r.loss_mse}};
  if (r.sentence_order) line["sop"] = {{"loss", r.loss_sop}, {"accuracy", r.sop_accuracy}, {"mlm_loss", r.loss_mlm}};
  if (r.task) line["task"] = {{"accuracy", r.task_accuracy}};
  if (r.diloco)
    line["diloco"] = {{"outer_step", r.outer_step},
                      {"outer_bytes", r.outer_bytes},
                      {"outer_steps", r.outer_steps},
                      {"outer_bytes_total", r.outer_bytes_total},
                      {"outer_bytes_per_hour", r.outer_bytes_per_hour}};
  if (r.loss_scale > 0) line["fp16"] = {{"loss_scale", r.loss_scale}, {"skipped_step", r.skipped_step}};
  return line;
}

namespace {

/// The line's nested groups of the cluster's numbers: distillation's loss parts, ALBERT's SOP,
/// fine-tuning's accuracy, DiLoCo's outer step and fp16's loss scale.
void read_groups(const nlohmann::json& line, messages::window_report& cluster) {
  if (line.contains("loss_parts")) {
    const auto& parts = line["loss_parts"];
    cluster.distilled = true;
    cluster.loss_ce = parts.value("ce", 0.0);
    cluster.loss_mlm = parts.value("mlm", 0.0);
    cluster.loss_cos = parts.value("cos", 0.0);
    cluster.loss_mse = parts.value("mse", 0.0);
  }
  if (line.contains("sop")) {
    const auto& sop = line["sop"];
    cluster.sentence_order = true;
    cluster.loss_sop = sop.value("loss", 0.0);
    cluster.sop_accuracy = sop.value("accuracy", 0.0);
    cluster.loss_mlm = sop.value("mlm_loss", 0.0);
  }
  if (const auto task = line.find("task"); task != line.end() && task->is_object()) {
    cluster.task = true;
    cluster.task_accuracy = task->value("accuracy", 0.0);
  }
  if (const auto diloco = line.find("diloco"); diloco != line.end() && diloco->is_object()) {
    cluster.diloco = true;
    cluster.outer_step = diloco->value("outer_step", false);
    cluster.outer_bytes = diloco->value("outer_bytes", int64_t{0});
    cluster.outer_steps = diloco->value("outer_steps", int64_t{0});
    cluster.outer_bytes_total = diloco->value("outer_bytes_total", int64_t{0});
    cluster.outer_bytes_per_hour = diloco->value("outer_bytes_per_hour", 0.0);
  }
  if (line.contains("fp16")) {
    cluster.loss_scale = line["fp16"].value("loss_scale", 0.0);
    cluster.skipped_step = line["fp16"].value("skipped_step", false);
  }
}

}  // namespace

window_summary window_from_json(const nlohmann::json& line) {
  window_summary window;
  window.step = line.at("step").get<int64_t>();
  window.unix_seconds = line.value("unix_s", 0.0);
  if (line.contains("eval_perplexity")) window.eval_perplexity = line["eval_perplexity"].get<double>();
  if (line.contains("eval_accuracy"))
    window.eval_task = task_evaluation{line.value("eval_loss", 0.0), line["eval_accuracy"].get<double>(),
                                       line.value("eval_examples", int64_t{0})};
  if (const auto rtt = line.find("heartbeat_rtt_ms"); rtt != line.end() && rtt->is_object())
    window.heartbeats = heartbeat_summary{rtt->value("nodes", int64_t{0}), rtt->value("p50", 0.0), rtt->value("p99", 0.0),
                                          rtt->value("max", 0.0), rtt->value("worst_node", std::string())};
  if (const auto named = line.find("straggler"); named != line.end() && named->is_object())
    window.straggler = named_straggler{named->value("rank", -1), named->value("reason", std::string()),
                                       named->value("seconds", 0.0), named->value("windows", int64_t{0})};
  messages::window_report cluster;
  cluster.step = window.step;
  for (const auto& field : messages::window_report_fields()) {
    if (field.json_key == nullptr) continue;
    std::visit([&](auto member) {
      auto& value = cluster.*member;
      value = line.value(field.json_key, value);
    }, field.member);
  }
  // null: an fp16 window whose overflow skipped the step (JSON has no NaN).
  if (const auto norm = line.find("grad_norm"); norm != line.end())
    cluster.grad_norm = norm->is_null() ? std::numeric_limits<double>::quiet_NaN() : norm->get<double>();
  cluster.parameter_hash = from_hex64(line.value("parameter_hash", std::string("0")));
  read_groups(line, cluster);
  const auto time_split = [](messages::window_report& r, const nlohmann::json& time) {
    r.data_wait_seconds = time.value("data_wait", 0.0);
    r.forward_seconds = time.value("forward", 0.0);
    r.backward_seconds = time.value("backward", 0.0);
    r.exposed_comm_seconds = time.value("allreduce", 0.0);  // the split's part: what the worker waited
    r.optimizer_seconds = time.value("optimizer", 0.0);
    r.checkpoint_stall_seconds = time.value("checkpoint", 0.0);
    r.eval_seconds = time.value("eval", 0.0);
    r.teacher_seconds = time.value("teacher", 0.0);
  };
  if (!line.contains("ranks")) {  // a line from before every rank reported: the flat fields are rank 0's
    window.ranks.push_back({"", cluster, {}});
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
    r.ring_sent_bytes = rank.value("ring_sent_bytes", std::vector<int64_t>{});
    r.ring_link_units = rank.value("ring_link_units", std::vector<int64_t>{});
    r.ring_send_posted_unix = rank.value("ring_send_posted_unix", std::vector<double>{});
    r.ring_receive_done_unix = rank.value("ring_receive_done_unix", std::vector<double>{});
    r.ring_receive_posted_unix = rank.value("ring_receive_posted_unix", std::vector<double>{});
    auto links = links_from_json(rank.value("links", nlohmann::json()), r.rank);
    window.ranks.push_back({rank.value("node", std::string()), std::move(r), std::move(links)});
  }
  if (window.ranks.empty()) window.ranks.push_back({"", cluster, {}});
  if (const auto statistics = line.find("rank_stats"); statistics != line.end()) {  // a bounded window
    window.statistics = rank_statistics_from_json(*statistics);
    window.rings = line.value("rings", nlohmann::json::array());
  }
  return window;
}

dropped_lines drop_windows_from(const std::filesystem::path& jsonl, int64_t from) {
  std::ifstream in(jsonl);
  if (!in) return {};
  std::string kept, line;
  dropped_lines dropped;
  bool rewrite = false;
  while (std::getline(in, line)) {
    const bool terminated = !in.eof();  // getline stopped at a newline, not at the file's end
    const auto parsed = nlohmann::json::parse(line, nullptr, false);
    if (!terminated) rewrite = true;  // the next line must not be appended to this one
    if (!terminated && parsed.is_discarded()) {
      dropped.torn = true;  // its writer died mid-line (a head killed while it wrote)
      continue;
    }
    if (!parsed.is_discarded() && parsed.is_object() && parsed.contains("step") && parsed["step"].is_number_integer() &&
        parsed["step"].get<int64_t>() >= from) {
      ++dropped.windows;
      continue;
    }
    kept += line + '\n';
  }
  if (dropped.windows > 0 || rewrite) write_file_atomically(jsonl, kept);
  return dropped;
}

namespace {

// The step of one line, when it is a window's.
std::optional<int64_t> step_of(std::string_view line) {
  const auto parsed = nlohmann::json::parse(line, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) return std::nullopt;
  const auto step = parsed.find("step");
  if (step == parsed.end() || !step->is_number_integer()) return std::nullopt;
  return step->get<int64_t>();
}

}  // namespace

// Reads backwards a chunk at a time: `tail` holds the file from `position` on, less the lines
// already looked at. A last line missing its newline counts when it is whole (as for
// drop_windows_from), not when it was cut short.
int64_t last_window_step(const std::filesystem::path& jsonl) {
  std::ifstream in(jsonl, std::ios::binary | std::ios::ate);
  if (!in) return 0;
  constexpr int64_t chunk = 64 * 1024;
  int64_t position = in.tellg();
  std::string tail;
  while (position > 0) {
    const int64_t take = std::min(chunk, position);
    position -= take;
    std::string piece(static_cast<std::size_t>(take), '\0');
    in.seekg(position);
    in.read(piece.data(), take);
    tail = piece + tail;
    while (!tail.empty()) {  // the lines that begin in `tail`, from the last
      const std::size_t end = tail.back() == '\n' ? tail.size() - 1 : tail.size();
      const auto previous = end == 0 ? std::string::npos : tail.rfind('\n', end - 1);
      if (previous == std::string::npos && position > 0) break;  // it begins before what was read
      const std::size_t begin = previous == std::string::npos ? 0 : previous + 1;
      if (const auto step = step_of(std::string_view(tail).substr(begin, end - begin))) return *step;
      tail.resize(begin);
    }
  }
  return 0;
}

}  // namespace troupe::io
