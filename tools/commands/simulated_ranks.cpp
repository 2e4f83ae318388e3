#include "tools/commands/simulated_ranks.hpp"

#include <algorithm>
#include <cstdio>

#include "messages/metrics_batch_codec.hpp"

namespace troupe::tools {

messages::window_report simulated_ranks::report(int64_t step, int32_t rank, std::mt19937& random) const {
  std::uniform_real_distribution<double> jitter(0.0, 0.05);
  messages::window_report r;
  r.step = step;
  r.rank = rank;
  r.world_size = world;
  r.loss = 7.0 - 0.001 * static_cast<double>(step);
  r.lr = 1e-4;
  r.grad_norm = 1.5;
  r.samples = int64_t{8} * world;
  r.tokens = r.samples * 128;
  r.masked_tokens = r.tokens / 7;
  r.window_seconds = 1.0 + jitter(random);
  r.data_wait_seconds = jitter(random) / 10;
  r.forward_seconds = 0.3 + jitter(random);
  r.backward_seconds = 0.5 + jitter(random);
  r.allreduce_seconds = 0.15 + jitter(random);
  r.exposed_comm_seconds = 0.1 + jitter(random);
  r.optimizer_seconds = 0.05;
  r.lateness_seconds = rank == late_rank ? late_seconds : jitter(random);
  // The allreduced window statistics every rank reports alike: who came last, by how much.
  r.straggler_rank = late_rank >= 0 ? late_rank : 0;
  r.straggler_lateness_seconds = late_rank >= 0 ? late_seconds : 0.05;
  r.parameter_hash = 0x1234abcd5678ef90ULL + static_cast<uint64_t>(step);
  const double start = 1.8e9 + static_cast<double>(step);
  r.ring_seconds = {0.15 + jitter(random)};
  r.ring_bytes = {17'600'000};
  r.ring_sent_bytes = {35'200'000};
  r.ring_link_units = {int64_t{2} * (world - 1)};
  // Every link alike: each of the ring's 2(n − 1) steps' chunks arrive a step's share of the
  // sum after both ends posted (io/monitor/link_times.hpp), give or take 5%.
  const double step_latency = 0.15 / (4.0 * std::max(1, world - 1));
  r.ring_send_posted_unix = {start + 0.8};
  r.ring_receive_posted_unix = {start + 0.8};
  r.ring_receive_done_unix = {start + 0.8 + step_latency * (1.0 + jitter(random))};
  return r;
}

std::string simulated_ranks::node_name(int32_t rank) {
  char name[16];
  std::snprintf(name, sizeof name, "node%04d", rank);
  return name;
}

std::vector<std::string> simulated_ranks::window_batches(int64_t step, std::mt19937& random) const {
  std::vector<std::string> batches;
  batches.reserve(static_cast<std::size_t>(world));
  for (int32_t rank = 0; rank < world; ++rank) {
    messages::metrics_batch batch;
    batch.node = node_name(rank);
    batch.generation = 1;
    batch.sequence = static_cast<uint64_t>(step);
    batch.resident_bytes = int64_t{270} << 20;
    batch.windows.push_back(report(step, rank, random));
    batch.links.push_back({0, rank, (rank + 1) % world, "tcp", "eth0"});
    batches.push_back(messages::encode_metrics_batch(batch));
  }
  return batches;
}

}  // namespace troupe::tools
