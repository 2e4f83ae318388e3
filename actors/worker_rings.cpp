#include "actors/worker_rings.hpp"

#include "io/comm/ring_schedule.hpp"

namespace troupe::actors {
namespace {

using clock = std::chrono::steady_clock;

double seconds(clock::duration d) { return std::chrono::duration<double>(d).count(); }

/// The report's per-ring figures, sized for `rings` (zeros where nothing was summed yet).
void size_ring_figures(messages::window_report& report, std::size_t rings) {
  for (auto* figures : {&report.ring_seconds, &report.ring_send_posted_unix, &report.ring_receive_done_unix,
                        &report.ring_receive_posted_unix})
    if (figures->size() < rings) figures->resize(rings, 0.0);
  for (auto* figures : {&report.ring_bytes, &report.ring_sent_bytes, &report.ring_link_units})
    if (figures->size() < rings) figures->resize(rings, 0);
}

/// Adds one sum's link timing to ring r's in the report (several sums per window: the means
/// are weighted by their chunks).
void add_link_timing(messages::window_report& report, std::size_t r, const io::link_timing& link) {
  const auto weighted = [](double mean, int64_t count, double other, int64_t other_count) {
    const int64_t total = count + other_count;
    return total > 0 ? mean + (other - mean) * static_cast<double>(other_count) / static_cast<double>(total) : 0.0;
  };
  auto& units = report.ring_link_units[r];
  report.ring_send_posted_unix[r] = weighted(report.ring_send_posted_unix[r], units, link.send_posted_unix, link.sends);
  report.ring_receive_done_unix[r] =
      weighted(report.ring_receive_done_unix[r], units, link.receive_done_unix, link.receives);
  report.ring_receive_posted_unix[r] =
      weighted(report.ring_receive_posted_unix[r], units, link.receive_posted_unix, link.receives);
  units += link.sends;
}

}  // namespace

bool allreduce_sums::arrived() const {
  for (const auto& sum : sums)
    if (!sum.handle.ready()) return false;
  return true;
}

worker_rings::worker_rings(std::vector<caf::actor> reducers, std::chrono::seconds collective_timeout)
    : reducers_(std::move(reducers)), collective_timeout_(collective_timeout) {}

std::vector<int> worker_rings::all_but_statistics_ring() const {
  std::vector<int> out;
  for (int r = count() > 1 ? 1 : 0; r < count(); ++r) out.push_back(r);
  return out;
}

void worker_rings::start(allreduce_sums& into, int ring, reduce_request request, int64_t step,
                         const std::string& what) {
  if (into.sums.empty()) into.started = clock::now();
  request.sequence = next_sequence_++;
  request.step = step;
  ring_sum sum;
  sum.ring = static_cast<std::size_t>(ring);
  sum.gradient_bytes = request.gradient_count * sizeof(float);
  sum.awaited = "the reducer of ring " + std::to_string(ring) + " (" + (what.empty() ? "step " + std::to_string(step) : what) + ")";
  sum.handle = start_sum(reducers_[sum.ring], std::move(request));
  into.sums.push_back(std::move(sum));
}

void worker_rings::start_slices(allreduce_sums& into, const std::vector<int>& rings, float* data, std::size_t count,
                                io::wire_format wire, std::shared_ptr<const void> owner, int64_t step,
                                const std::string& what) {
  const int parts = static_cast<int>(rings.size());
  for (int i = 0; i < parts; ++i) {
    const auto part = io::ring_slice(count, parts, i);
    if (part.empty()) continue;
    reduce_request request;
    request.gradient = data + part.begin;
    request.gradient_count = part.size();
    request.gradient_wire = wire;
    request.gradient_owner = owner;
    start(into, rings[static_cast<std::size_t>(i)], std::move(request), step, what);
  }
}

void worker_rings::start_host_sum(allreduce_sums& into, const std::shared_ptr<std::vector<double>>& values,
                                  int64_t step) {
  reduce_request request;
  request.statistics = values->data();
  request.statistic_count = values->size();
  request.statistics_owner = values;
  start(into, 0, std::move(request), step);
}

void worker_rings::start_slices(allreduce_sums& into, float* data, std::size_t elements, io::wire_format wire,
                                std::shared_ptr<const void> owner, int64_t step) {
  std::vector<int> rings(static_cast<std::size_t>(count()));
  for (int r = 0; r < count(); ++r) rings[static_cast<std::size_t>(r)] = r;
  start_slices(into, rings, data, elements, wire, std::move(owner), step);
}

void worker_rings::wait_for(const allreduce_sums& sums, std::size_t index) const {
  const auto& sum = sums.sums.at(index);
  sum.handle.wait(backstop(), sum.awaited);
}

allreduce_time worker_rings::wait(allreduce_sums& sums, messages::window_report& report) const {
  if (sums.sums.empty()) return {};
  const auto waiting_since = clock::now();
  size_ring_figures(report, reducers_.size());
  for (const auto& sum : sums.sums) {
    const auto result = sum.handle.wait(backstop(), sum.awaited);
    report.ring_seconds[sum.ring] += result.seconds;
    report.ring_bytes[sum.ring] += static_cast<int64_t>(sum.gradient_bytes);
    report.ring_sent_bytes[sum.ring] += static_cast<int64_t>(result.bytes_sent);
    if (sums.times_links) add_link_timing(report, sum.ring, result.link);
  }
  const auto done = clock::now();
  const allreduce_time time{seconds(done - sums.started), seconds(done - waiting_since)};
  sums.sums.clear();
  return time;
}

void worker_rings::wait_for_allreduce(allreduce_sums& sums, messages::window_report& report,
                                      clock::time_point exposed_since) const {
  if (sums.sums.empty()) return;  // a world of one: nothing to wait for or count
  const auto time = wait(sums, report);
  report.allreduce_seconds += time.since_start;
  report.exposed_comm_seconds += seconds(clock::now() - exposed_since);
}

}  // namespace troupe::actors
