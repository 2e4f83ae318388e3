#pragma once
/// The word embeddings' gradient in two parts, so that most of it can be summed early.
///
/// BERT, DistilBERT and ALBERT tie the output layer to the word embeddings W [vocab, width]: W
/// is used last by the forward pass (the output projection: a dense gradient, ready at the very
/// start of the backward pass) and first (the lookup of the input words: a gradient in the rows
/// of the words the batch holds, ready at the very end). Autograd would add both into W's
/// `.grad` at the end, so the largest parameter (70% of bert-mini's gradient, 21% of
/// bert-base's) could only be summed after the backward pass.
///
/// Here the lookup reads W through an alias: a second leaf on W's memory whose `.grad` is a
/// separate dense buffer (the lookup part). W's own gradient then holds the output layer's part
/// and is complete early (compute/gradient_buckets.hpp sends its bucket first). The lookup part
/// is folded into W's gradient at the window's end:
///
///   alone          fold_rows(rows_used()): W.grad[rows] += lookup[rows]
///   over rings     the ranks sum their row flags (every rank learns the union U of the rows
///                  any rank used), pack lookup[U] at the buffer's start (pack), sum those
///                  |U| × width values over the rings, then fold_packed(U): W.grad[U] += them;
///                  a worker first folds, before a window's last micro-batch, what the
///                  earlier ones left (fold_rows, on its own), so that part is summed in W's
///                  early bucket and U holds the last micro-batch's rows only
///
/// Every element of W's gradient then holds the output part and the lookup part of every
/// micro-batch on every rank: alone, (output part) + (lookup part), each summed over the
/// micro-batches; over rings, the ranks' sums of (output part + the earlier micro-batches'
/// lookup part), plus the ranks' sum of the last micro-batch's lookup rows. The same additions
/// on every rank, with or without overlap. Only rows some rank's last micro-batch used cross the
/// network as packed rows (a few thousand of 30522), not the whole matrix.
///
/// Both buffers lie in the memory given at construction (the tail of the worker's gradient
/// buffer, which may be shared memory the rings read in place).

#include <ATen/Tensor.h>

#include <cstdint>

namespace troupe::compute {

class word_lookup_gradient {
 public:
  /// Elements the buffers take for a vocabulary of `vocab` rows of `width`: the lookup part
  /// and one flag per row.
  static int64_t buffer_elements(int64_t vocab, int64_t width) { return vocab * width + vocab; }

  /// `word_embeddings`: W, a leaf (its `.grad` a view of the flat gradient); `buffer`:
  /// buffer_elements(...) zero-filled fp32 elements on W's device.
  word_lookup_gradient(const at::Tensor& word_embeddings, const at::Tensor& buffer);

  /// The alias the model's word lookup reads (W's values, its own gradient).
  const at::Tensor& lookup_weight() const { return alias_; }
  /// Marks the rows of `input_ids` as used in this window (before the micro-batch's backward).
  void mark_rows(const at::Tensor& input_ids);
  /// One float per vocabulary row: 1 where this rank used the row since the last fold (the
  /// rings sum them: then the number of ranks that did).
  const at::Tensor& row_flags() const { return flags_; }
  /// The rows flagged (on any rank, once the flags are summed), ascending, int64.
  at::Tensor rows_used() const;
  /// Moves the lookup part's `rows` (ascending) to the buffer's start, in that order; returns
  /// the packed values [rows, width] (a view: what the rings sum).
  at::Tensor pack(const at::Tensor& rows);
  /// W.grad[rows] += the packed values (summed over the ranks); zeroes both buffers.
  void fold_packed(const at::Tensor& rows);
  /// Alone: W.grad[rows] += lookup[rows] for the rows flagged; zeroes both buffers.
  void fold_rows();
  /// Whether a lookup part waits to be folded (a backward pass ran since the last fold).
  bool pending() const { return pending_; }
  /// Forgets the lookup part (a window that will not be stepped).
  void discard();

 private:
  at::Tensor word_embeddings_;  ///< W
  at::Tensor alias_;            ///< the leaf the lookup reads
  at::Tensor lookup_;           ///< [vocab, width]: the alias's .grad
  at::Tensor flags_;            ///< [vocab]
  bool pending_ = false;
};

}  // namespace troupe::compute
