// Sentence classification data read as run_glue.py reads a user's files (GLUE .tsv, JSON lines),
// its label set as run_glue.py sorts it, errors naming file, line and field, and sentences
// encoded as HF's tokenizers encode them for classification.
#include <gtest/gtest.h>

#include "io/data/classification_file.hpp"
#include "io/data/sentence_pair_encoding.hpp"
#include "io/os/scratch_directory.hpp"
#include "io/text/wordpiece_tokenizer.hpp"
#include "tests/support/error_text.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::io {
namespace {

using troupe::testing::expect_error;

struct data_files {
  scratch_directory dir{"classification"};
  std::filesystem::path write(const std::string& name, const std::string& text) {
    const auto path = dir.path() / name;
    troupe::testing::write_text(path, text);
    return path;
  }
};

TEST(classification_file, glue_tsv_with_one_sentence_and_integer_labels_sorted_numerically) {
  data_files files;
  // SST-2's layout; labels 10 and 9 sort as numbers, not as text.
  const auto data = read_classification_file(
      files.write("train.tsv", "sentence\tlabel\r\nit 's a charming journey\t10\n\nunfunny\t9\nfine\t1\n"));
  EXPECT_EQ(data.text_columns, (std::vector<std::string>{"sentence"}));
  ASSERT_EQ(data.examples.size(), 3u);
  EXPECT_EQ(data.examples[0].text, "it 's a charming journey");
  EXPECT_FALSE(data.examples[0].pair.has_value());
  EXPECT_EQ(data.examples[1].line, 4);
  EXPECT_EQ(classification_labels(data), (std::vector<std::string>{"1", "9", "10"}));
  EXPECT_EQ(label_indices(data, classification_labels(data)), (std::vector<int64_t>{2, 1, 0}));
}

TEST(classification_file, json_lines_pairs_follow_run_glues_column_choice) {
  data_files files;
  // sentence1/sentence2 win wherever they stand; string labels sort as text.
  const auto pairs = read_classification_file(files.write(
      "train.jsonl", "{\"idx\": 0, \"sentence2\": \"b\", \"label\": \"yes\", \"sentence1\": \"a\"}\n"
                     "{\"idx\": 1, \"sentence2\": \"d\", \"label\": \"no\", \"sentence1\": \"c\"}\n"));
  EXPECT_EQ(pairs.text_columns, (std::vector<std::string>{"sentence1", "sentence2"}));
  EXPECT_EQ(pairs.examples[1].text, "c");
  EXPECT_EQ(*pairs.examples[1].pair, "d");
  EXPECT_EQ(classification_labels(pairs), (std::vector<std::string>{"no", "yes"}));
  // Otherwise the first two columns other than "label", in the file's order; integer labels.
  const auto first_two =
      read_classification_file(files.write("other.json", "{\"question\": \"q\", \"label\": 1, \"passage\": \"p\"}\n"));
  EXPECT_EQ(first_two.text_columns, (std::vector<std::string>{"question", "passage"}));
  EXPECT_EQ(first_two.examples[0].label, "1");
}

TEST(classification_file, bad_files_are_named_with_line_and_field) {
  data_files files;
  expect_error([&] { read_classification_file(files.dir.path() / "none.tsv"); }, "cannot open");
  expect_error([&] { read_classification_file(files.write("a.csv", "x")); }, "expected a .tsv");
  expect_error([&] { read_classification_file(files.write("b.tsv", "sentence\tpolarity\nx\t1\n")); },
               "b.tsv: no \"label\" column (columns: \"sentence\", \"polarity\")");
  expect_error([&] { read_classification_file(files.write("c.tsv", "sentence\tlabel\nx\t1\ny\n")); },
               "c.tsv: line 3: expected 2 tab-separated fields, got 1");
  expect_error([&] { read_classification_file(files.write("d.jsonl", "{\"text\": 5, \"label\": 1}\n")); },
               "d.jsonl: line 1: text: expected a string, got 5");
  expect_error([&] { read_classification_file(files.write("e.jsonl", "{\"text\": \"x\", \"label\": 1}\n[1]\n")); },
               "e.jsonl: line 2: expected a JSON object");
  expect_error([&] { read_classification_file(files.write("f.jsonl", "{\"text\": \"x\", \"label\": 1.5}\n")); },
               "label: expected a string or an integer, got 1.5");
  expect_error([&] { read_classification_file(files.write("g.tsv", "sentence\tlabel\n")); }, "g.tsv: no examples");
  const auto dev = read_classification_file(files.write("dev.tsv", "sentence\tlabel\nx\t0\ny\t2\n"));
  expect_error([&] { label_indices(dev, {"0", "1"}); }, "dev.tsv: line 3: label: \"2\" is not one of the training");
}

TEST(sentence_pair_encoding, special_tokens_token_types_and_longest_first_truncation) {
  // [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4 a=5 b=6 c=7 d=8 e=9
  const wordpiece_tokenizer tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d", "e"}, {}, "vocab");
  const auto single = encode_sentences(tokens, "a b", std::nullopt, 16);
  EXPECT_EQ(single.input_ids, (std::vector<int32_t>{2, 5, 6, 3}));
  EXPECT_EQ(single.token_types, (std::vector<int8_t>{0, 0, 0, 0}));
  const auto pair = encode_sentences(tokens, "a b", std::string("c"), 16);
  EXPECT_EQ(pair.input_ids, (std::vector<int32_t>{2, 5, 6, 3, 7, 3}));
  EXPECT_EQ(pair.token_types, (std::vector<int8_t>{0, 0, 0, 0, 1, 1}));
  // 4 + 2 pieces into room 3: the longer loses until both have 2, then the first on the tie.
  const auto cut = encode_sentences(tokens, "a b c d", std::string("e e"), 6);
  EXPECT_EQ(cut.input_ids, (std::vector<int32_t>{2, 5, 3, 9, 9, 3}));
  EXPECT_EQ(encode_sentences(tokens, "a b c d", std::nullopt, 4).input_ids, (std::vector<int32_t>{2, 5, 6, 3}));
  expect_error([&] { encode_sentences(tokens, "a", std::string("b"), 4); }, "max_seq_length: expected ≥ 5");
}

}  // namespace
}  // namespace troupe::io
