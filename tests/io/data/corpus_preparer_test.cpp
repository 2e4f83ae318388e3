#include "io/data/corpus_preparer.hpp"

#include <gtest/gtest.h>

#include "io/data/sequence_packer.hpp"
#include "io/data/token_dataset.hpp"
#include "io/os/file_util.hpp"
#include "io/text/sentence_splitter.hpp"
#include "messages/error.hpp"
#include "tests/support/error_text.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::io {
namespace {

prepare_options options_for(const troupe::testing::temp_dir& dir) {
  prepare_options options;
  options.inputs = {dir / "corpus"};
  options.tokenizer_spec = "wordpiece:" + (dir / "vocab.txt").string();
  options.out = dir / "data";
  options.max_seq_length = 32;
  options.validation_fraction = 0.2;
  return options;
}

std::string error_of(const prepare_options& options) {
  return troupe::testing::error_of([&] { prepare_corpus(options); });
}

TEST(corpus_preparer, prepares_split_and_deterministic_shards) {
  troupe::testing::temp_dir dir;
  troupe::testing::write_toy_corpus(dir / "corpus", 10, 30, 3);
  troupe::testing::write_toy_vocab(dir / "vocab.txt");
  auto options = options_for(dir);
  options.sequences_per_shard = 16;
  auto summary = prepare_corpus(options);
  EXPECT_EQ(summary.documents, 10u);
  token_dataset train(dir / "data", "train"), validation(dir / "data", "validation");
  const auto validation_documents = train.manifest().find_split("validation")->documents;
  EXPECT_GE(validation_documents, 1u);  // each document's own draw, at 0.2 (io/data/corpus_router.hpp)
  EXPECT_LT(validation_documents, 10u);
  EXPECT_EQ(train.size() + validation.size(), summary.train_sequences + summary.validation_sequences);
  EXPECT_GT(train.manifest().find_split("train")->shard_files.size(), 1u);
  for (uint64_t i = 0; i < train.size(); ++i) {
    auto view = train.sequence(i);
    EXPECT_EQ(view.token(0), train.manifest().specials.cls);
    EXPECT_EQ(view.token(view.length - 1u), train.manifest().specials.sep);
    EXPECT_EQ(view.token(view.type_boundary - 1u), train.manifest().specials.sep);
  }
  // Same input, same bytes, on any number of threads.
  auto again = options;
  again.out = dir / "data2";
  again.threads = 3;
  prepare_corpus(again);
  for (const auto& file : train.manifest().find_split("train")->shard_files)
    EXPECT_EQ(read_whole_file(dir / "data" / file), read_whole_file(dir / "data2" / file)) << file;
}

TEST(corpus_preparer, invalid_utf8_names_file_and_line) {
  troupe::testing::temp_dir dir;
  troupe::testing::write_toy_vocab(dir / "vocab.txt");
  troupe::testing::write_text(dir / "corpus" / "good.txt", "the old sailor.\n");
  troupe::testing::write_text(dir / "corpus" / "latin1.txt", "the sailor.\nthe caf\xe9 sailor.\n");
  auto message = error_of(options_for(dir));
  EXPECT_NE(message.find("latin1.txt:2: invalid UTF-8"), std::string::npos) << message;
  EXPECT_FALSE(std::filesystem::exists(dir / "data"));
}

TEST(corpus_preparer, empty_inputs_are_refused) {
  troupe::testing::temp_dir dir;
  troupe::testing::write_toy_vocab(dir / "vocab.txt");
  std::filesystem::create_directories(dir / "corpus");
  EXPECT_NE(error_of(options_for(dir)).find("no files found"), std::string::npos);
  troupe::testing::write_text(dir / "corpus" / "blank.txt", "\n\n   \n");
  EXPECT_NE(error_of(options_for(dir)).find("no text to train on"), std::string::npos);
  auto options = options_for(dir);
  options.inputs = {dir / "missing"};
  EXPECT_NE(error_of(options).find("missing: input not found"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "data"));
}

TEST(corpus_preparer, huge_lines_are_split_not_fatal) {
  troupe::testing::temp_dir dir;
  troupe::testing::write_toy_vocab(dir / "vocab.txt");
  std::string line;
  while (line.size() < (3u << 20)) line += "the old sailor sees the whale ";  // 3 MiB, no sentence end
  troupe::testing::write_text(dir / "corpus" / "huge.txt", line + "\n");
  troupe::testing::write_text(dir / "corpus" / "small.txt", "the king.\n");
  auto summary = prepare_corpus(options_for(dir));
  EXPECT_GT(summary.tokens, 500000u);
}

TEST(corpus_preparer, existing_output_is_kept_unless_overwrite) {
  troupe::testing::temp_dir dir;
  troupe::testing::write_toy_corpus(dir / "corpus", 3, 5, 1);
  troupe::testing::write_toy_vocab(dir / "vocab.txt");
  troupe::testing::write_text(dir / "data" / "precious.txt", "keep me");
  EXPECT_NE(error_of(options_for(dir)).find("already exists"), std::string::npos);
  EXPECT_EQ(read_whole_file(dir / "data" / "precious.txt"), "keep me");
  auto options = options_for(dir);
  options.tokenizer_spec = "bpe:32";
  options.overwrite = true;
  const auto message = error_of(options);
  EXPECT_NE(message.find("--tokenizer: expected wordpiece:VOCAB.txt, wordpiece:tokenizer.json or "
                         "sentencepiece:VOCAB_SIZE, got 'bpe:32'"),
            std::string::npos)
      << message;
  EXPECT_EQ(read_whole_file(dir / "data" / "precious.txt"), "keep me");
}

TEST(sentence_splitter, splits_on_sentence_ends_and_bounds_piece_size) {
  auto pieces = split_sentences("He left. \"Why?\" she asked! Mr.Smith stayed there");
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_EQ(pieces[0], "He left.");
  EXPECT_EQ(pieces[1], "\"Why?\"");
  EXPECT_EQ(pieces[2], "she asked!");
  EXPECT_EQ(pieces[3], "Mr.Smith stayed there");
  auto long_pieces = split_sentences(std::string(50, 'a') + " " + std::string(50, 'b'), 60);
  ASSERT_EQ(long_pieces.size(), 2u);
  EXPECT_EQ(long_pieces[1], std::string(50, 'b'));
}

TEST(sequence_packer, packs_segments_without_dropping_tokens) {
  special_token_ids specials;
  std::vector<std::vector<int32_t>> segments{{1000, 1001, 1002}, {1003, 1004}, {1005}, std::vector<int32_t>(30, 1006)};
  auto sequences = pack_document(segments, 16, specials, 1, 0);
  std::size_t real_tokens = 0;
  for (const auto& s : sequences) {
    EXPECT_LE(s.tokens.size(), 16u);
    EXPECT_EQ(s.tokens.front(), specials.cls);
    EXPECT_EQ(s.tokens.back(), specials.sep);
    EXPECT_EQ(s.tokens[s.type_boundary - 1u], specials.sep);
    for (auto t : s.tokens) real_tokens += t >= 1000;
  }
  EXPECT_EQ(real_tokens, 36u);
  EXPECT_EQ(pack_document(segments, 16, specials, 1, 0).size(), sequences.size());
}

// SOP: every sequence has A and B from one run (a one-segment run is cut inside), labels are
// 0 or 1 about half each, and putting a swapped pair back in order gives the document's tokens
// in order.
TEST(sequence_packer, sentence_order_pairs_are_consecutive_text_swapped_half_the_time) {
  special_token_ids specials;
  int swapped = 0, total = 0;
  for (uint64_t document = 0; document < 200; ++document) {
    std::vector<std::vector<int32_t>> segments;
    int32_t next = 1000;
    for (int s = 0; s < 5; ++s) {
      segments.emplace_back();
      for (uint64_t t = 0; t < 3 + (document + static_cast<uint64_t>(s)) % 7; ++t) segments.back().push_back(next++);
    }
    std::vector<int32_t> restored;
    for (const auto& sequence : pack_document(segments, 16, specials, 3, document, true)) {
      ASSERT_TRUE(sequence.sentence_order == 0 || sequence.sentence_order == 1);
      ASSERT_LT(sequence.type_boundary, sequence.tokens.size()) << "no segment B";
      const std::vector<int32_t> first(sequence.tokens.begin() + 1, sequence.tokens.begin() + sequence.type_boundary - 1);
      const std::vector<int32_t> second(sequence.tokens.begin() + sequence.type_boundary, sequence.tokens.end() - 1);
      const auto& a = sequence.sentence_order == 1 ? second : first;
      const auto& b = sequence.sentence_order == 1 ? first : second;
      restored.insert(restored.end(), a.begin(), a.end());
      restored.insert(restored.end(), b.begin(), b.end());
      swapped += sequence.sentence_order;
      ++total;
    }
    for (std::size_t i = 0; i < restored.size(); ++i) ASSERT_EQ(restored[i], 1000 + static_cast<int32_t>(i));
    ASSERT_EQ(restored.size(), static_cast<std::size_t>(next - 1000));
  }
  std::printf("%d of %d pairs swapped\n", swapped, total);
  EXPECT_NEAR(static_cast<double>(swapped) / total, 0.5, 0.08);
}

}  // namespace
}  // namespace troupe::io

namespace troupe::io {
namespace {

TEST(corpus_preparer, sentencepiece_trains_on_the_corpus_with_albert_ids) {
  troupe::testing::temp_dir dir;
  troupe::testing::write_toy_corpus(dir / "corpus", 6, 40, 9);
  auto options = options_for(dir);
  options.tokenizer_spec = "sentencepiece:64";
  auto summary = prepare_corpus(options);
  EXPECT_GT(summary.train_sequences, 0u);
  token_dataset data(dir / "data", "train");
  EXPECT_EQ(data.manifest().tokenizer_kind, "sentencepiece");
  EXPECT_EQ(data.manifest().vocab_size, 64);
  EXPECT_EQ(data.manifest().specials.cls, 2);
  EXPECT_EQ(data.manifest().specials.mask, 4);
  EXPECT_TRUE(std::filesystem::exists(dir / "data" / "spm.model"));
  EXPECT_EQ(data.sequence(0).token(0), 2);
  options.tokenizer_spec = "sentencepiece:many";
  options.overwrite = true;
  EXPECT_NE(error_of(options).find("expected a vocabulary size"), std::string::npos);
}

}  // namespace
}  // namespace troupe::io
