// data.whole_word_masking through the batch builder: the data's own tokenizer says which pieces
// continue a word, and a chosen word is masked with every piece of it.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "io/data/corpus_preparer.hpp"
#include "io/data/mlm_batch_builder.hpp"
#include "io/data/token_dataset.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::io {
namespace {

TEST(whole_word_masking, masks_every_piece_of_a_chosen_word) {
  troupe::testing::temp_dir dir;
  troupe::testing::write_text(dir / "vocab.txt",
                              "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n.\nthe\nsailor\nwalk\nwhale\n##s\n##ed\n##ing\n");
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the sailors walked . the whale walks . the sailor walking whales .\n";
  troupe::testing::write_text(dir / "corpus" / "a.txt", text);
  prepare_options options;
  options.inputs = {dir / "corpus"};
  options.tokenizer_spec = "wordpiece:" + (dir / "vocab.txt").string();
  options.out = dir / "data";
  options.max_seq_length = 32;
  options.validation_fraction = 0.0;
  prepare_corpus(options);
  const token_dataset train(dir / "data", "train");
  const auto continues = word_continuations_of(train.manifest(), dir / "data");
  ASSERT_EQ(continues->size(), 13u);
  for (std::size_t id = 0; id < continues->size(); ++id) EXPECT_EQ((*continues)[id], id >= 10) << "id " << id;

  const mlm_batch_builder builder(train, 0.3, 5, nullptr, 1, continues);
  std::vector<compute::sample_ref> refs;
  for (uint64_t i = 0; i < train.size(); ++i) refs.push_back({0, i});
  const auto batch = builder.build(refs);
  const auto seq = batch.input_ids.size(1);
  auto original = batch.input_ids.clone().view({-1});
  original.index_put_({batch.masked_positions}, batch.labels);
  std::vector<bool> masked(static_cast<std::size_t>(original.numel()), false);
  for (int64_t i = 0; i < batch.masked_positions.size(0); ++i)
    masked[static_cast<std::size_t>(batch.masked_positions[i].item<int64_t>())] = true;
  int64_t continuations_masked = 0;
  for (int64_t q = 1; q < original.numel(); ++q) {
    if (q % seq == 0 || !(*continues)[static_cast<std::size_t>(original[q].item<int64_t>())]) continue;
    EXPECT_EQ(masked[static_cast<std::size_t>(q)], masked[static_cast<std::size_t>(q - 1)])
        << "a piece masked without the rest of its word at " << q;
    continuations_masked += masked[static_cast<std::size_t>(q)] ? 1 : 0;
  }
  EXPECT_GT(continuations_masked, 0);
}

}  // namespace
}  // namespace troupe::io
