#include "compute/word_lookup_gradient.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "messages/error.hpp"

namespace troupe::compute {

word_lookup_gradient::word_lookup_gradient(const at::Tensor& word_embeddings, const at::Tensor& buffer)
    : word_embeddings_(word_embeddings) {
  TROUPE_ENFORCE(word_embeddings.dim() == 2 && word_embeddings.is_leaf() && word_embeddings.grad().defined(),
                 "the word embeddings must be a 2-d leaf with its gradient in the flat buffer");
  const int64_t vocab = word_embeddings.size(0), width = word_embeddings.size(1);
  TROUPE_ENFORCE(buffer.numel() == buffer_elements(vocab, width) && buffer.scalar_type() == at::kFloat &&
                     buffer.device() == word_embeddings.device(),
                 "word lookup buffer of ", buffer.numel(), " elements for ", vocab, " × ", width);
  lookup_ = buffer.narrow(0, 0, vocab * width).view({vocab, width});
  flags_ = buffer.narrow(0, vocab * width, vocab);
  alias_ = word_embeddings.detach();  // the same memory, a leaf of its own
  alias_.set_requires_grad(true);
  alias_.mutable_grad() = lookup_;  // autograd adds the lookup's gradient here, in place
}

void word_lookup_gradient::mark_rows(const at::Tensor& input_ids) {
  torch::NoGradGuard no_grad;
  flags_.index_fill_(0, input_ids.reshape({-1}).to(flags_.device()), 1.0);
  pending_ = true;
}

at::Tensor word_lookup_gradient::rows_used() const { return flags_.nonzero().reshape({-1}); }

at::Tensor word_lookup_gradient::pack(const at::Tensor& rows) {
  torch::NoGradGuard no_grad;
  const int64_t count = rows.numel();
  auto packed = lookup_.narrow(0, 0, count);
  packed.copy_(lookup_.index_select(0, rows));  // gathered first: source and destination overlap
  return packed;
}

void word_lookup_gradient::fold_packed(const at::Tensor& rows) {
  torch::NoGradGuard no_grad;
  auto packed = lookup_.narrow(0, 0, rows.numel());
  word_embeddings_.mutable_grad().index_add_(0, rows, packed);
  // Only the packed rows and the rows used hold anything: every flagged row is one of `rows`.
  packed.zero_();
  lookup_.index_fill_(0, rows, 0.0);
  flags_.index_fill_(0, rows, 0.0);
  pending_ = false;
}

void word_lookup_gradient::fold_rows() {
  const auto rows = rows_used();
  pack(rows);
  fold_packed(rows);
}

void word_lookup_gradient::discard() {
  torch::NoGradGuard no_grad;
  lookup_.zero_();
  flags_.zero_();
  pending_ = false;
}

}  // namespace troupe::compute
