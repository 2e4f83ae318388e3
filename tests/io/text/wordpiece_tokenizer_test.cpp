#include "io/text/wordpiece_tokenizer.hpp"

#include <gtest/gtest.h>

#include <functional>

#include "io/text/detokenize.hpp"
#include "io/text/hf_tokenizer_json.hpp"
#include "io/text/utf8.hpp"
#include "messages/error.hpp"
#include "tests/support/error_text.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::io {
namespace {

wordpiece_tokenizer make(std::vector<std::string> extra, bool lower_case = true) {
  std::vector<std::string> vocab{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  vocab.insert(vocab.end(), extra.begin(), extra.end());
  return wordpiece_tokenizer(vocab, {lower_case, 100}, "test vocab");
}

std::vector<std::string> pieces(const wordpiece_tokenizer& tok, const std::string& text) {
  std::vector<std::string> out;
  for (auto id : tok.encode(text)) out.push_back(tok.token(id));
  return out;
}

std::vector<std::string> words(const wordpiece_tokenizer& tok, const std::string& text) {
  std::vector<std::string> out;
  for (const auto& w : tok.basic_tokens(text)) out.push_back(encode_utf8(w.data(), w.data() + w.size()));
  return out;
}

using troupe::testing::expect_error;

TEST(wordpiece, greedy_longest_match_first_with_continuations) {
  auto tok = make({"un", "##aff", "##able", "unaff", "##a", "##ble", "run", "##ning", ","});
  EXPECT_EQ(pieces(tok, "unaffable"), (std::vector<std::string>{"unaff", "##able"}));
  EXPECT_EQ(pieces(tok, "running, unable"), (std::vector<std::string>{"run", "##ning", ",", "un", "##able"}));
  // "unaff" matches, then nothing covers "z": the whole word is unknown.
  EXPECT_EQ(pieces(tok, "unaffz run"), (std::vector<std::string>{"[UNK]", "run"}));
}

// What transformers' BertTokenizer.decode gives for these ids (tokens joined by spaces, "##"
// glued, clean_up_tokenization_spaces) and AlbertTokenizer's for SentencePiece pieces.
TEST(detokenize, joins_tokens_as_hf_decodes_them) {
  auto tok = make({"he", "didn", "'", "t", "run", "##ning", ",", "?", "it", "s", "."});
  const auto vocab = tok.pieces();
  std::vector<int64_t> ids;
  for (auto id : tok.encode("he didn't running, it's ?")) ids.push_back(id);
  EXPECT_EQ(join_tokens("wordpiece", vocab, ids), "he didn't running, it's?");
  const std::vector<std::string> spm{"<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]", "\xe2\x96\x81he", "\xe2\x96\x81we",
                                     "nt", "."};
  EXPECT_EQ(join_tokens("sentencepiece", spm, {5, 6, 7, 8}), "he went.");
  EXPECT_EQ(join_tokens("wordpiece", vocab, {99}), "<id 99>");
}

TEST(wordpiece, lower_cases_and_strips_accents_for_uncased_vocabularies) {
  auto tok = make({"hello", "cafe", "naive"});
  EXPECT_EQ(pieces(tok, "HÉLLO Café naïve"), (std::vector<std::string>{"hello", "cafe", "naive"}));
  auto cased = make({"Hello", "Café"}, /*lower_case=*/false);
  EXPECT_EQ(pieces(cased, "Hello Café"), (std::vector<std::string>{"Hello", "Café"}));
}

TEST(wordpiece, splits_punctuation_and_cjk_characters) {
  auto tok = make({});
  EXPECT_EQ(words(tok, "don't stop—now!"), (std::vector<std::string>{"don", "'", "t", "stop", "—", "now", "!"}));
  EXPECT_EQ(words(tok, "ab中文cd"), (std::vector<std::string>{"ab", "中", "文", "cd"}));
  EXPECT_EQ(words(tok, "a$b^c"), (std::vector<std::string>{"a", "$", "b", "^", "c"}));  // ASCII symbols count
}

TEST(wordpiece, cleans_control_characters_and_normalises_whitespace) {
  auto tok = make({});
  // \u00a0 is a space separator (Zs); \u200b (Cf) and \x01 (Cc) are removed.
  EXPECT_EQ(words(tok, "a\tb\u00a0c\u200bd\x01" "e\r\nf"), (std::vector<std::string>{"a", "b", "cde", "f"}));
  EXPECT_TRUE(tok.encode("   \t\n ").empty());
}

TEST(wordpiece, words_over_100_characters_are_unknown) {
  auto tok = make({"a", "##a"});
  EXPECT_EQ(pieces(tok, std::string(100, 'a')).size(), 100u);
  EXPECT_EQ(pieces(tok, std::string(101, 'a')), (std::vector<std::string>{"[UNK]"}));
}

TEST(wordpiece, rejects_invalid_utf8_and_incomplete_vocabularies) {
  auto tok = make({});
  expect_error([&] { tok.encode("ok \xff\xfe bad"); }, "invalid UTF-8 at byte 3 of the text to tokenize");
  expect_error([] { wordpiece_tokenizer({"[PAD]", "[UNK]"}, {}, "small vocab"); },
               "small vocab: vocabulary has no [CLS] token");
  troupe::testing::temp_dir dir;
  expect_error([&] { wordpiece_tokenizer::from_file(dir / "missing.txt"); },
               (dir / "missing.txt").string() + ": cannot open the WordPiece vocabulary");
  troupe::testing::write_text(dir / "empty.txt", "");
  expect_error([&] { wordpiece_tokenizer::from_file(dir / "empty.txt"); },
               (dir / "empty.txt").string() + ": the WordPiece vocabulary is empty");
}

TEST(wordpiece, reads_hf_tokenizer_json_and_names_what_it_cannot_use) {
  troupe::testing::temp_dir dir;
  const std::string vocab = R"("vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "cafe": 5, "##s": 6})";
  const auto write = [&](const std::string& name, const std::string& model, const std::string& normalizer) {
    troupe::testing::write_text(dir / name, R"({"version": "1.0", "normalizer": )" + normalizer + R"(, "model": {)" +
                                                model + "}}");
    return dir / name;
  };
  const std::string bert = R"({"type": "BertNormalizer", "lowercase": true, "strip_accents": null})";
  const auto good = write("good.json", R"("type": "WordPiece", "max_input_chars_per_word": 100, )" + vocab, bert);
  auto tok = wordpiece_from_tokenizer_json(good, {false, 100});  // the file's lowercase wins
  EXPECT_EQ(pieces(tok, "Cafés"), (std::vector<std::string>{"cafe", "##s"}));
  EXPECT_EQ(tok.specials().mask, 4);
  expect_error([&] { wordpiece_from_tokenizer_json(write("bpe.json", R"("type": "BPE", )" + vocab, bert), {}); },
               "bpe.json: model.type: expected WordPiece (a BERT tokenizer), got \"BPE\"");
  expect_error(
      [&] {
        wordpiece_from_tokenizer_json(
            write("gap.json", R"("type": "WordPiece", "vocab": {"[PAD]": 0, "[UNK]": 7})", bert), {});
      },
      "gap.json: model.vocab[\"[UNK]\"]: expected a distinct id below 2");
  expect_error(
      [&] {
        wordpiece_from_tokenizer_json(
            write("accents.json", R"("type": "WordPiece", )" + vocab,
                  R"({"type": "BertNormalizer", "lowercase": true, "strip_accents": false})"),
            {});
      },
      "accents.json: normalizer.strip_accents");
  expect_error([&] { wordpiece_from_tokenizer_json(write("nfc.json", R"("type": "WordPiece", )" + vocab,
                                                         R"({"type": "NFC"})"), {}); },
               "nfc.json: normalizer: expected BertNormalizer or null");
}

}  // namespace
}  // namespace troupe::io
