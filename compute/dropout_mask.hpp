#pragma once
/// Dropout masks keyed by sample (docs/architecture.md#contracts): a sample's masks depend only on the run's seed,
/// the sample (its epoch and id) and the dropout site, never on the rank, the batch it shares
/// or how many calls came before. So a window's gradient does not depend on how its samples are
/// split among workers, and a resumed or re-planned run draws the same masks.

#include <ATen/Tensor.h>

#include <cstdint>
#include <vector>

namespace troupe::compute {

/// What decides the masks of one forward: `seed` (the run's), one key per batch row (its
/// sample, sample_key below) and the site, the n-th dropout of this forward, counted by the
/// model as it applies them (reset to 0 before each forward).
struct dropout_keys {
  uint64_t seed = 0;
  std::vector<uint64_t> rows;
  uint32_t site = 0;

  /// draw_dropout's cache: the rows' 32-bit keys of a block of sites, put on a device in one copy
  /// (each copy from the host costs a pinned buffer and a call, ~50 µs of the host's time on a
  /// GPU machine: 37 sites a BERT-base forward). Used while `seed` and `rows` are the same.
  struct site_block {
    at::Tensor keys;  // [sites, rows] int32
    uint32_t first_site = 0;
    uint64_t seed = 0;
    std::vector<uint64_t> rows;
  } drawn;
};

/// A sample's key: the same for the sample wherever and whenever it is trained.
uint64_t sample_key(uint64_t epoch, uint64_t sample_id);

// The mask: a float tensor shaped like `like` (dimension 0 = batch rows), 1/(1−p) with
// probability 1−p and 0 otherwise. Element j of row b at site s is kept when
// hash32(j ^ k) ≥ p·2^32, where k is the low 32 bits of keyed_random(seed, rows[b], s) and
// hash32 is Chris Wellons' lowbias32 integer hash (good avalanche from two multiplies). Both
// functions below compute exactly these bits; dropout_keys.site advances by one per call.

/// CPU: a plain loop (~1 ns per element, vectorised), the fast path of training on the CPU.
at::Tensor dropout_keep_mask(const at::Tensor& like, double p, dropout_keys& keys);

/// Any device (CUDA included): the same hash as tensor operations on `like`'s device, in 32-bit
/// integers; the rows' keys reach the device without stopping the host. Slower than the loop on
/// the CPU; tested equal to it bit for bit (on a GPU too). The reference of compute/keyed_dropout.
at::Tensor dropout_keep_mask_tensor(const at::Tensor& like, double p, dropout_keys& keys);

/// One site's draw, for whoever applies the mask without materialising it (compute/keyed_dropout):
/// each row's 32-bit key (int32, already on `like`'s device), the threshold p·2^32 and the scale
/// of a kept element, 1/(1−p).
struct dropout_draw {
  at::Tensor row_keys;
  uint32_t threshold = 0;
  float scale = 1.0f;
};

/// The draw of the next site for `like` (checked as the mask functions check; advances keys.site).
dropout_draw draw_dropout(const at::Tensor& like, double p, dropout_keys& keys);

/// The float mask of a draw, as tensor operations on `like`'s device (dropout_keep_mask_tensor's).
at::Tensor keep_mask_of(const at::Tensor& like, const dropout_draw& draw);

}  // namespace troupe::compute
