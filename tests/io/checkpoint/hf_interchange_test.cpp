#include "io/checkpoint/hf_interchange.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "io/checkpoint/checkpoint_store.hpp"
#include "io/data/corpus_preparer.hpp"
#include "io/os/file_util.hpp"
#include "tests/support/error_text.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::io {
namespace {

using nlohmann::json;

/// Prepares the toy corpus with `tokenizer_spec` into dir/data and writes a checkpoint whose job
/// config names that data directory; returns the checkpoint directory.
std::filesystem::path checkpoint_on(const troupe::testing::temp_dir& dir, const std::string& tokenizer_spec) {
  troupe::testing::write_toy_corpus(dir / "corpus", 6, 40, 9);
  if (tokenizer_spec.rfind("wordpiece:", 0) == 0) troupe::testing::write_toy_vocab(dir / "vocab.txt");
  prepare_options options;
  options.inputs = {dir / "corpus"};
  options.tokenizer_spec = tokenizer_spec;
  options.out = dir / "data";
  options.max_seq_length = 32;
  prepare_corpus(options);
  checkpoint_contents contents;
  contents.model.vocab_size = 64;
  contents.model.hidden_size = 8;
  contents.model.num_hidden_layers = 1;
  contents.model.num_attention_heads = 2;
  contents.model.intermediate_size = 16;
  contents.parameters = {{"bert.embeddings.word_embeddings.weight", torch::randn({64, 8})}};
  contents.optimizer = {{"exp_avg", torch::zeros({8})}};
  contents.job = {{"data", {{"dir", (dir / "data").string()}}}};
  return save_checkpoint(dir / "run", contents, 2);
}

TEST(hf_interchange, a_sentencepiece_model_exports_with_an_albert_tokenizer) {
  troupe::testing::temp_dir dir;
  const auto checkpoint = checkpoint_on(dir, "sentencepiece:64");
  export_hf(checkpoint, dir / "hf", "", false);
  EXPECT_TRUE(std::filesystem::exists(dir / "hf" / "config.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "hf" / "model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "hf" / "vocab.txt"));
  EXPECT_EQ(read_whole_file(dir / "hf" / "spiece.model"), read_whole_file(dir / "data" / "spm.model"));
  const auto config = json::parse(read_whole_file(dir / "hf" / "tokenizer_config.json"));
  EXPECT_EQ(config.at("tokenizer_class"), "AlbertTokenizer");
  EXPECT_EQ(config.at("do_lower_case"), false);
  EXPECT_EQ(config.at("keep_accents"), true);
}

TEST(hf_interchange, a_vocabulary_given_for_sentencepiece_data_is_refused) {
  troupe::testing::temp_dir dir;
  const auto checkpoint = checkpoint_on(dir, "sentencepiece:64");
  troupe::testing::write_toy_vocab(dir / "vocab.txt");
  troupe::testing::expect_error([&] { export_hf(checkpoint, dir / "hf", dir / "vocab.txt", false); },
                                "--vocab: the checkpoint's data was tokenized with sentencepiece (");
  EXPECT_FALSE(std::filesystem::exists(dir / "hf"));
}

TEST(hf_interchange, a_wordpiece_model_exports_with_a_bert_tokenizer) {
  troupe::testing::temp_dir dir;
  const auto checkpoint = checkpoint_on(dir, "wordpiece:" + (dir / "vocab.txt").string());
  export_hf(checkpoint, dir / "hf", "", false);
  EXPECT_EQ(read_whole_file(dir / "hf" / "vocab.txt"), read_whole_file(dir / "data" / "vocab.txt"));
  EXPECT_FALSE(std::filesystem::exists(dir / "hf" / "spiece.model"));
  const auto config = json::parse(read_whole_file(dir / "hf" / "tokenizer_config.json"));
  EXPECT_EQ(config.at("tokenizer_class"), "BertTokenizer");
  EXPECT_EQ(config.at("do_lower_case"), true);
}

}  // namespace
}  // namespace troupe::io
