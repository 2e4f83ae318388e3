#include "compute/window_statistics.hpp"

#include <algorithm>

#include "messages/error.hpp"

namespace troupe::compute {
namespace {

constexpr std::size_t loss_sum_slot = 0, samples_slot = 1, tokens_slot = 2, masked_tokens_slot = 3;
constexpr std::size_t first_loss_part_slot = 4;
constexpr std::size_t sentence_order_loss_slot = 8, sentence_order_correct_slot = 9, overflow_slot = 10;
constexpr std::size_t stop_slot = 11, task_correct_slot = 12;
constexpr std::size_t header_slots = 13;
constexpr std::size_t hash_parts = 4;  ///< 16 bits each
constexpr std::size_t slots_per_rank = hash_parts + 1;

std::size_t first_slot_of(int64_t rank) { return header_slots + slots_per_rank * static_cast<std::size_t>(rank); }

}  // namespace

std::size_t window_statistics::size(int64_t world) { return first_slot_of(world); }

std::vector<double> window_statistics::pack(const window_totals& mine, const rank_stamp& stamp, int64_t rank,
                                            int64_t world) {
  TROUPE_ENFORCE(rank >= 0 && rank < world, "rank ", rank, " outside a world of ", world);
  std::vector<double> values(size(world), 0.0);
  values[loss_sum_slot] = mine.loss_sum;
  values[samples_slot] = static_cast<double>(mine.samples);
  values[tokens_slot] = static_cast<double>(mine.tokens);
  values[masked_tokens_slot] = static_cast<double>(mine.masked_tokens);
  for (std::size_t p = 0; p < mine.loss_part_sums.size(); ++p) values[first_loss_part_slot + p] = mine.loss_part_sums[p];
  values[sentence_order_loss_slot] = mine.sentence_order_loss_sum;
  values[sentence_order_correct_slot] = static_cast<double>(mine.sentence_order_correct);
  values[overflow_slot] = static_cast<double>(mine.overflowed_ranks);
  values[stop_slot] = static_cast<double>(mine.stopping_ranks);
  values[task_correct_slot] = static_cast<double>(mine.task_correct);
  const std::size_t first = first_slot_of(rank);
  for (std::size_t part = 0; part < hash_parts; ++part)
    values[first + part] = static_cast<double>((stamp.parameter_hash >> (16 * part)) & 0xffff);
  values[first + hash_parts] = stamp.ready_unix_seconds;
  return values;
}

window_statistics window_statistics::unpack(const std::vector<double>& summed, int64_t world) {
  if (summed.size() != size(world))
    throw make_error("window statistics of ", summed.size(), " values, expected ", size(world), " for ", world,
                     " ranks");
  window_statistics result;
  auto& totals = result.totals;
  totals.loss_sum = summed[loss_sum_slot];
  totals.samples = static_cast<int64_t>(summed[samples_slot]);
  totals.tokens = static_cast<int64_t>(summed[tokens_slot]);
  totals.masked_tokens = static_cast<int64_t>(summed[masked_tokens_slot]);
  for (std::size_t p = 0; p < totals.loss_part_sums.size(); ++p) totals.loss_part_sums[p] = summed[first_loss_part_slot + p];
  totals.sentence_order_loss_sum = summed[sentence_order_loss_slot];
  totals.sentence_order_correct = static_cast<int64_t>(summed[sentence_order_correct_slot]);
  totals.overflowed_ranks = static_cast<int64_t>(summed[overflow_slot]);
  totals.stopping_ranks = static_cast<int64_t>(summed[stop_slot]);
  totals.task_correct = static_cast<int64_t>(summed[task_correct_slot]);
  result.ranks.resize(static_cast<std::size_t>(world));
  for (int64_t rank = 0; rank < world; ++rank) {
    const std::size_t first = first_slot_of(rank);
    auto& stamp = result.ranks[static_cast<std::size_t>(rank)];
    for (std::size_t part = 0; part < hash_parts; ++part)
      stamp.parameter_hash |= static_cast<uint64_t>(summed[first + part]) << (16 * part);
    stamp.ready_unix_seconds = summed[first + hash_parts];
  }
  return result;
}

straggler window_statistics::slowest() const {
  straggler result;
  if (ranks.empty()) return result;
  double first = ranks[0].ready_unix_seconds, last = first;
  for (std::size_t rank = 1; rank < ranks.size(); ++rank) {
    const double ready = ranks[rank].ready_unix_seconds;
    first = std::min(first, ready);
    if (ready > last) {
      last = ready;
      result.rank = static_cast<int32_t>(rank);
    }
  }
  result.lateness_seconds = last - first;
  result.first_ready_unix_seconds = first;
  return result;
}

std::optional<int64_t> window_statistics::first_diverged_rank() const {
  for (std::size_t rank = 1; rank < ranks.size(); ++rank)
    if (ranks[rank].parameter_hash != ranks[0].parameter_hash) return static_cast<int64_t>(rank);
  return std::nullopt;
}

int64_t loss_weight(const window_totals& totals, bool task) { return task ? totals.samples : totals.masked_tokens; }

window_totals with_losses_scaled(window_totals totals, double factor) {
  totals.loss_sum *= factor;
  for (auto& part : totals.loss_part_sums) part *= factor;
  totals.sentence_order_loss_sum *= factor;
  return totals;
}

}  // namespace troupe::compute
