#include "compute/word_accuracy.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>

namespace troupe::compute {
namespace {

std::vector<int64_t> to_vector(const at::Tensor& tensor) {
  auto flat = tensor.to(at::kCPU).to(at::kLong).contiguous();
  return {flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel()};
}

void count(top_k_hits& hits, guess_rank rank) {
  ++hits.counted;
  if (rank == guess_rank::first) ++hits.top1;
  if (rank != guess_rank::missed) ++hits.top5;
}

guess_rank worse(guess_rank a, guess_rank b) {
  const auto quality = [](guess_rank r) { return r == guess_rank::first ? 2 : r == guess_rank::top5 ? 1 : 0; };
  return quality(a) <= quality(b) ? a : b;
}

}  // namespace

top_k_hits piece_hits(const std::vector<guess_rank>& ranks) {
  top_k_hits hits;
  for (auto rank : ranks) count(hits, rank);
  return hits;
}

top_k_hits whole_word_hits(const mlm_batch& batch, const std::vector<guess_rank>& ranks,
                           const std::vector<bool>& continues_word) {
  const auto inputs = to_vector(batch.input_ids);
  const auto positions = to_vector(batch.masked_positions);
  const auto labels = to_vector(batch.labels);
  const int64_t seq = batch.input_ids.size(1);
  // The original token at a flat position: the label where it was masked, else the input.
  std::map<int64_t, int64_t> label_at;
  for (std::size_t i = 0; i < positions.size(); ++i) label_at[positions[i]] = labels[i];
  const auto original = [&](int64_t flat) {
    const auto found = label_at.find(flat);
    return found != label_at.end() ? found->second : inputs[static_cast<std::size_t>(flat)];
  };
  const auto continues = [&](int64_t id) {
    return id >= 0 && static_cast<std::size_t>(id) < continues_word.size() && continues_word[static_cast<std::size_t>(id)];
  };
  // Word (by its first flat position) → the worst rank of its masked pieces.
  std::map<int64_t, guess_rank> words;
  for (std::size_t i = 0; i < positions.size(); ++i) {
    int64_t start = positions[i];
    while (start % seq != 0 && continues(original(start))) --start;
    const auto [word, inserted] = words.emplace(start, ranks.at(i));
    if (!inserted) word->second = worse(word->second, ranks[i]);
  }
  top_k_hits hits;
  for (const auto& [start, rank] : words) count(hits, rank);
  return hits;
}

std::vector<guess_rank> unigram_ranks(const std::vector<int64_t>& top5, const at::Tensor& labels) {
  std::vector<guess_rank> ranks;
  for (const auto label : to_vector(labels)) {
    if (!top5.empty() && label == top5.front())
      ranks.push_back(guess_rank::first);
    else if (std::find(top5.begin(), top5.end(), label) != top5.end())
      ranks.push_back(guess_rank::top5);
    else
      ranks.push_back(guess_rank::missed);
  }
  return ranks;
}

}  // namespace troupe::compute
