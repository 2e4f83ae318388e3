#pragma once
/// Top-1/top-5 accuracy of masked-LM guesses, per masked piece and per whole word (troupe eval).

#include <ATen/Tensor.h>

#include <cstdint>
#include <vector>

#include "compute/mlm_batch.hpp"

namespace troupe::compute {

/// How well one masked piece was guessed: the first guess, among the five best, or neither.
enum class guess_rank : int8_t { missed = 0, first = 1, top5 = 5 };

/// Of `counted` predictions (masked pieces, or words), how many were right at 1 and at 5.
struct top_k_hits {
  int64_t counted = 0;
  int64_t top1 = 0;
  int64_t top5 = 0;
  void add(const top_k_hits& other) {
    counted += other.counted;
    top1 += other.top1;
    top5 += other.top5;
  }
};

/// Each masked piece counts once.
top_k_hits piece_hits(const std::vector<guess_rank>& ranks);

/// Each word with a masked piece counts once: a masked piece belongs to the word that starts at
/// the nearest position at or before it whose original token does not continue a word
/// (`continues_word[id]`, io::word_continuations). The word is right at 1 (at 5) when every
/// masked piece of it is; its pieces left unmasked are context, not guesses. `ranks` follow
/// `batch.masked_positions`.
top_k_hits whole_word_hits(const mlm_batch& batch, const std::vector<guess_rank>& ranks,
                           const std::vector<bool>& continues_word);

/// The unigram baseline's rank for each of `labels`: `top5` are its guesses, best first.
std::vector<guess_rank> unigram_ranks(const std::vector<int64_t>& top5, const at::Tensor& labels);

}  // namespace troupe::compute
