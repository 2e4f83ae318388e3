#include "io/data/mlm_batch_builder.hpp"

#include "compute/dropout_mask.hpp"
#include "io/data/data_tokenizer.hpp"
#include "io/text/word_pieces.hpp"
#include "messages/error.hpp"

#include <ATen/ATen.h>

namespace troupe::io {

namespace {

std::vector<int32_t> special_ids_of(const dataset_manifest& manifest) {
  const auto& s = manifest.specials;
  return {s.pad, s.cls, s.sep, s.mask, s.unk};
}

}  // namespace

mlm_batch_builder::mlm_batch_builder(const token_dataset& dataset, double mask_probability, uint64_t seed,
                                     std::shared_ptr<const std::vector<double>> token_weights, int32_t max_ngram,
                                     std::shared_ptr<const std::vector<bool>> word_continuations)
    : dataset_(dataset), seed_(seed) {
  masking_.probability = mask_probability;
  masking_.vocab_size = dataset.manifest().vocab_size;
  masking_.mask_id = dataset.manifest().specials.mask;
  masking_.special_ids = special_ids_of(dataset.manifest());
  masking_.token_weights = std::move(token_weights);
  masking_.max_ngram = max_ngram;
  masking_.word_continuations = std::move(word_continuations);
}

std::shared_ptr<const std::vector<bool>> word_continuations_of(const dataset_manifest& manifest,
                                                               const std::filesystem::path& data_dir) {
  const auto specials = special_ids_of(manifest);
  return std::make_shared<const std::vector<bool>>(io::word_continuations(
      manifest.tokenizer_kind, open_data_tokenizer(manifest, data_dir)->pieces(),
      std::vector<int64_t>(specials.begin(), specials.end())));
}

std::shared_ptr<const std::vector<double>> smoothed_masking_weights(const token_dataset& dataset, double smoothing) {
  return std::make_shared<const std::vector<double>>(
      compute::smoothed_token_weights(count_tokens(dataset), smoothing, special_ids_of(dataset.manifest())));
}

compute::mlm_batch mlm_batch_builder::build(const std::vector<compute::sample_ref>& samples) const {
  const auto batch = static_cast<int64_t>(samples.size());
  const int64_t seq = dataset_.manifest().max_seq_length;
  compute::mlm_batch out;
  out.input_ids = at::empty({batch, seq}, at::kLong);
  out.token_type_ids = at::zeros({batch, seq}, at::kLong);
  auto lengths = at::empty({batch}, at::kLong);
  auto* ids = out.input_ids.data_ptr<int64_t>();
  auto* types = out.token_type_ids.data_ptr<int64_t>();
  auto* length_data = lengths.data_ptr<int64_t>();
  const bool fine_tuning = !dataset_.manifest().fine_tuning_task.empty();
  std::vector<int64_t> positions, labels, sentence_order, task_labels;
  std::vector<int32_t> row(static_cast<std::size_t>(seq));
  bool any_padding = false;
  for (int64_t b = 0; b < batch; ++b) {
    auto view = dataset_.sequence(samples[static_cast<std::size_t>(b)].sample_id);
    for (int64_t p = 0; p < seq; ++p) row[static_cast<std::size_t>(p)] = view.token(static_cast<std::size_t>(p));
    const auto chosen = fine_tuning ? std::vector<compute::masked_position>{}
                                    : compute::mask_tokens(row.data(), view.length, masking_, seed_,
                                                           samples[static_cast<std::size_t>(b)].epoch,
                                                           samples[static_cast<std::size_t>(b)].sample_id);
    if (fine_tuning) task_labels.insert(task_labels.end(), view.task_labels.begin(), view.task_labels.end());
    for (int64_t p = 0; p < seq; ++p) {
      ids[b * seq + p] = row[static_cast<std::size_t>(p)];
      types[b * seq + p] = (p >= view.type_boundary && p < view.length) ? 1 : 0;
    }
    for (const auto& c : chosen) {
      positions.push_back(b * seq + c.position);
      labels.push_back(c.label);
    }
    length_data[b] = view.length;
    if (view.sentence_order >= 0) sentence_order.push_back(view.sentence_order);
    out.sample_keys.push_back(compute::sample_key(samples[static_cast<std::size_t>(b)].epoch,
                                                  samples[static_cast<std::size_t>(b)].sample_id));
    any_padding = any_padding || view.length < seq;
    out.tokens += view.length;
  }
  if (any_padding) out.lengths = lengths;
  out.masked_positions = at::tensor(positions, at::kLong);
  out.labels = at::tensor(labels, at::kLong);
  if (!sentence_order.empty()) {
    TROUPE_ENFORCE(static_cast<int64_t>(sentence_order.size()) == batch, "some sequences lack sentence-order labels");
    out.sentence_order_labels = at::tensor(sentence_order, at::kLong);
  }
  if (fine_tuning) out.task_labels = at::tensor(task_labels, at::kLong).view({batch, 2});
  out.samples = batch;
  return out;
}

compute::window_counts mlm_batch_builder::count(const std::vector<compute::sample_ref>& samples) const {
  compute::window_counts counts;
  const bool fine_tuning = !dataset_.manifest().fine_tuning_task.empty();
  std::vector<int32_t> row(static_cast<std::size_t>(dataset_.manifest().max_seq_length));
  for (const auto& sample : samples) {
    auto view = dataset_.sequence(sample.sample_id);
    counts.tokens += view.length;
    ++counts.samples;
    if (fine_tuning) continue;  // nothing is masked
    for (std::size_t p = 0; p < row.size(); ++p) row[p] = view.token(p);
    counts.masked_tokens += static_cast<int64_t>(
        compute::mask_tokens(row.data(), view.length, masking_, seed_, sample.epoch, sample.sample_id).size());
  }
  return counts;
}

std::pair<at::Tensor, at::Tensor> sequence_tensors(const token_dataset& dataset, uint64_t index) {
  auto view = dataset.sequence(index);
  const int64_t seq = dataset.manifest().max_seq_length;
  auto tokens = at::empty({seq}, at::kLong);
  auto types = at::zeros({seq}, at::kLong);
  auto* ids = tokens.data_ptr<int64_t>();
  auto* type_data = types.data_ptr<int64_t>();
  for (int64_t p = 0; p < seq; ++p) {
    ids[p] = view.token(static_cast<std::size_t>(p));
    if (p >= view.type_boundary && p < view.length) type_data[p] = 1;
  }
  return {tokens, types};
}

std::vector<uint64_t> count_tokens(const token_dataset& dataset) {
  std::vector<uint64_t> counts(static_cast<std::size_t>(dataset.manifest().vocab_size), 0);
  for (uint64_t i = 0; i < dataset.size(); ++i) {
    auto view = dataset.sequence(i);
    for (uint16_t p = 0; p < view.length; ++p) ++counts[static_cast<std::size_t>(view.token(p))];
  }
  return counts;
}

}  // namespace troupe::io
