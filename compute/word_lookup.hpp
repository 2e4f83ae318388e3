#pragma once
/// The input word lookup of a tied embedding table, with a backward pass that touches only the
/// rows the batch used.
///
/// Autograd's embedding backward (LibTorch 1.13's `embedding_dense_backward`) builds a zeroed
/// gradient as large as the table, adds each token's row of the incoming gradient into it, and
/// the table's AccumulateGrad then adds that whole table into `.grad`: three passes over the
/// table per micro-batch (31 MB for bert-mini, 94 MB for BERT-base), although a micro-batch uses
/// a few hundred of its 30522 rows. On the CPU they are a large part of the backward pass's last
/// step, after the last gradient bucket has gone (docs/architecture.md#overlapped-allreduce), so
/// nothing hides them.
///
/// `look_up_words` computes the same lookup; its backward finds the rows the micro-batch used,
/// sums each used row's token gradients in token order starting from zero (the same kernel on
/// the compact problem), and adds each sum once into the table's `.grad`. That is the dense
/// path's arithmetic for every used row (x + 0 = x for the others), so the gradient is the same
/// bits. It applies where the table is a leaf whose `.grad` is already defined (the trainer's
/// word-lookup alias, compute/word_lookup_gradient.hpp), on the CPU and in grad mode; elsewhere
/// it is autograd's lookup. Off the CPU the dense passes cost little and finding the used rows
/// would wait for the device (the count of unique rows sizes a tensor), so the lookup stays
/// autograd's there.

#include <torch/types.h>

namespace troupe::compute {

/// The rows of `table` [vocab, width] for `input_ids` (any shape): [..., width].
torch::Tensor look_up_words(const torch::Tensor& table, const torch::Tensor& input_ids);

}  // namespace troupe::compute
