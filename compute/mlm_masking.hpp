#pragma once
/// BERT's masked-LM corruption, deterministic per (seed, epoch, sample).

#include <cstdint>
#include <memory>
#include <vector>

namespace troupe::compute {

struct masking_config {
  double probability = 0.15;  ///< share of maskable tokens chosen for prediction
  int64_t vocab_size = 0;
  int32_t mask_id = 103;
  std::vector<int32_t> special_ids;  ///< never chosen ([CLS], [SEP], [PAD], ...)
  /// Token-frequency-smoothed masking (HF distiller's mlm_smoothing): a weight per vocabulary
  /// id (smoothed_token_weights); null: every maskable position alike.
  std::shared_ptr<const std::vector<double>> token_weights;
  /// ALBERT's n-gram masking: spans of n ≤ max_ngram consecutive tokens, n drawn with
  /// probability ∝ 1/n; 1: single tokens.
  int32_t max_ngram = 1;
  /// Whole-word masking (BERT's later "wwm" models, HF's DataCollatorForWholeWordMask): per
  /// vocabulary id, true when the piece continues the word before it (io::word_continuations);
  /// a word is chosen as a whole, all its pieces predicted. Null: every piece on its own.
  std::shared_ptr<const std::vector<bool>> word_continuations;
};

/// HF distiller's mlm_smoothing weights: max(count, 1)^−smoothing per id, 0 for special ids,
/// so rare tokens are masked more often than their frequency alone would have them.
std::vector<double> smoothed_token_weights(const std::vector<uint64_t>& counts, double smoothing,
                                           const std::vector<int32_t>& special_ids);

/// One chosen position: where, and which token the model must predict there.
struct masked_position {
  int32_t position;
  int32_t label;
};

/// Chooses and corrupts positions of `tokens[0, length)` in place. Each non-special position
/// is chosen with `probability` (at least one per sequence that has any maskable token); a
/// chosen token becomes [MASK] 80% of the time, a uniformly random token 10%, and stays 10%.
/// Every draw is keyed_random(seed, epoch, sample_id, position), so the mask of a sample does
/// not depend on which worker, batch or run produced it.
///
/// With token_weights, exactly ⌈probability · maskable⌉ positions are chosen, without
/// replacement, position p with probability proportional to the weight of its token
/// (Efraimidis–Spirakis: the positions with the largest u_p^(1/w_p), u_p the same keyed draw);
/// the corruption is the same 80/10/10. HF draws its ⌈0.15 · tokens⌉ per batch; per sample keeps
/// the mask independent of the batch (docs/architecture.md#contracts).
///
/// With word_continuations, the draw at a word's first piece chooses the whole word (each word
/// with `probability`, at least one per sequence), so about `probability` of the pieces are
/// predicted, every piece of a chosen word; the corruption is drawn per piece as above.
///
/// With max_ngram > 1, ⌈probability · maskable⌉ positions are covered by spans: start positions
/// are taken in the order of their keyed draws, each with a length n ∝ 1/n (shortened to what
/// is still wanted, and to what fits between special tokens and spans already chosen).
std::vector<masked_position> mask_tokens(int32_t* tokens, int32_t length, const masking_config& config,
                                         uint64_t seed, uint64_t epoch, uint64_t sample_id);

}  // namespace troupe::compute
