// `troupe prepare`'s input formats (docs/data.md#input-formats): the same documents give the same
// bytes whatever form they come in (one per file, BERT's blank-line format, JSON Lines, plain, .gz
// or .zst), on any number of threads and in any listing order; bad records name their file and
// line, or are skipped and counted; large documents stream in parts.

#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <map>
#include <nlohmann/json.hpp>

#include "io/data/corpus_preparer.hpp"
#include "io/data/document_reader.hpp"
#include "io/data/token_dataset.hpp"
#include "io/os/file_util.hpp"
#include "messages/error.hpp"
#include "tests/support/error_text.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::io {
namespace {

using troupe::testing::temp_dir;
using troupe::testing::write_text;

/// Six short documents of the toy grammar, each of a few lines.
std::vector<std::string> documents() {
  return {"the old sailor saw a whale.\nthe whale saw the sailor.",
          "a king sees the sea. the sea is old.",
          "the young captain saw the ship.\nthe ship saw a storm.\nthe storm was old.",
          "a whale sees a ship.",
          "the sailor and the captain saw the king.\nthe king saw the sea.",
          "a storm sees the old whale. the whale is young."};
}

std::string bert_format(const std::vector<std::string>& docs) {
  std::string text;
  for (const auto& doc : docs) text += doc + "\n\n";
  return text;
}

std::string jsonl_format(const std::vector<std::string>& docs) {
  std::string text;
  for (const auto& doc : docs) text += nlohmann::json{{"meta", {{"body", doc}}}, {"id", 7}}.dump() + "\n";
  return text;
}

void write_gzip(const std::filesystem::path& file, const std::string& text) {
  gzFile out = gzopen(file.c_str(), "wb");
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(gzwrite(out, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(out), Z_OK);
}

void write_zstd(const std::filesystem::path& file, const std::string& text) {
  std::string compressed(ZSTD_compressBound(text.size()), '\0');
  const auto size = ZSTD_compress(compressed.data(), compressed.size(), text.data(), text.size(), 3);
  ASSERT_EQ(ZSTD_isError(size), 0u);
  compressed.resize(size);
  write_text(file, compressed);
}

prepare_options options_for(const temp_dir& dir, const std::filesystem::path& input, const std::string& out) {
  prepare_options options;
  options.inputs = {input};
  options.tokenizer_spec = "wordpiece:" + (dir / "vocab.txt").string();
  options.out = dir / out;
  options.max_seq_length = 16;
  options.validation_fraction = 0.3;
  options.threads = 2;
  options.batch_bytes = 100;  // a document or two per batch
  return options;
}

/// Every shard's bytes and the split counts, to compare two preparations.
std::map<std::string, std::string> shards_of(const std::filesystem::path& data) {
  std::map<std::string, std::string> shards;
  const auto manifest = nlohmann::json::parse(read_whole_file(data / "manifest.json"));
  for (const auto& [name, split] : manifest["splits"].items()) {
    shards[name + " documents"] = std::to_string(split["documents"].get<int>());
    for (const auto& file : split["shards"]) shards[file] = read_whole_file(data / file.get<std::string>());
  }
  return shards;
}

std::string error_of(const prepare_options& options) {
  return troupe::testing::error_of([&] { prepare_corpus(options); });
}

class corpus_formats : public ::testing::Test {
 protected:
  void SetUp() override { troupe::testing::write_toy_vocab(dir_ / "vocab.txt"); }
  temp_dir dir_;
};

TEST_F(corpus_formats, the_same_documents_give_the_same_bytes_in_every_format_and_compression) {
  const auto docs = documents();
  for (std::size_t d = 0; d < docs.size(); ++d) write_text(dir_ / "files" / ("doc-" + std::to_string(d) + ".txt"), docs[d]);
  write_text(dir_ / "bert.txt", bert_format(docs));
  write_text(dir_ / "docs.jsonl", jsonl_format(docs));
  write_gzip(dir_ / "docs.jsonl.gz", jsonl_format(docs));
  write_zstd(dir_ / "docs.jsonl.zst", jsonl_format(docs));

  const auto from_files = prepare_corpus(options_for(dir_, dir_ / "files", "from-files"));
  EXPECT_EQ(from_files.documents, docs.size());
  EXPECT_GE(from_files.validation_sequences, 1u);
  auto bert = options_for(dir_, dir_ / "bert.txt", "from-bert");
  bert.format = corpus_format::blank_line;
  EXPECT_EQ(prepare_corpus(bert).documents, docs.size());
  const auto expected = shards_of(dir_ / "from-files");
  EXPECT_EQ(shards_of(dir_ / "from-bert"), expected);
  for (const std::string name : {"docs.jsonl", "docs.jsonl.gz", "docs.jsonl.zst"}) {
    auto jsonl = options_for(dir_, dir_ / name, "from-" + name);
    jsonl.format = corpus_format::jsonl;
    jsonl.jsonl_field = "meta.body";
    EXPECT_EQ(prepare_corpus(jsonl).documents, docs.size()) << name;
    EXPECT_EQ(shards_of(dir_ / ("from-" + name)), expected) << name;
  }
}

TEST_F(corpus_formats, any_thread_count_and_listing_order_give_the_same_bytes) {
  troupe::testing::write_toy_corpus(dir_ / "a", 12, 40, 3);
  troupe::testing::write_toy_corpus(dir_ / "b", 9, 30, 4);
  auto one = options_for(dir_, dir_ / "a", "one-thread");
  one.inputs = {dir_ / "a", dir_ / "b"};
  one.threads = 1;
  one.batch_bytes = 1 << 20;
  prepare_corpus(one);
  auto many = options_for(dir_, dir_ / "b", "four-threads");
  many.inputs = {dir_ / "b", dir_ / "a"};
  many.threads = 4;
  many.batch_bytes = 300;  // many batches in flight at once
  prepare_corpus(many);
  EXPECT_EQ(shards_of(dir_ / "one-thread"), shards_of(dir_ / "four-threads"));
}

TEST_F(corpus_formats, bad_json_lines_name_file_and_line_or_are_skipped_and_counted) {
  write_text(dir_ / "docs.jsonl", "{\"text\": \"the old sailor.\"}\n{\"text\": \"the king\"\n[1, 2]\n"
                                  "{\"body\": \"a whale.\"}\n{\"text\": 42}\n\n{\"text\": \"a ship.\"}\n");
  auto options = options_for(dir_, dir_ / "docs.jsonl", "data");
  options.format = corpus_format::jsonl;
  auto message = error_of(options);
  EXPECT_NE(message.find("docs.jsonl:2: not valid JSON"), std::string::npos) << message;
  EXPECT_NE(message.find("--skip-bad-records"), std::string::npos) << message;
  options.skip_bad_records = 3;
  message = error_of(options);
  EXPECT_NE(message.find("docs.jsonl:5: field 'text' is a number, expected a string"), std::string::npos) << message;
  EXPECT_NE(message.find("one more than --skip-bad-records 3"), std::string::npos) << message;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "data"));
  options.skip_bad_records = 4;
  const auto summary = prepare_corpus(options);
  EXPECT_EQ(summary.bad_records, 4u);
  EXPECT_EQ(summary.documents, 2u);
  options.jsonl_field = "meta..body";
  options.overwrite = true;
  EXPECT_NE(error_of(options).find("--jsonl-field: expected a key"), std::string::npos);
}

TEST_F(corpus_formats, a_truncated_gzip_or_zstd_file_is_an_error_or_its_rest_is_skipped) {
  std::string text;
  for (int i = 0; i < 30000; ++i) text += "the old sailor saw a whale number " + std::to_string(i) + ".\n";
  write_gzip(dir_ / "whole.txt.gz", text);
  write_zstd(dir_ / "whole.txt.zst", text);
  for (const std::string name : {"whole.txt.gz", "whole.txt.zst"}) {
    const auto bytes = read_whole_file(dir_ / name);
    const auto cut = dir_ / "cut" / ("cut-" + name);
    write_text(cut, bytes.substr(0, bytes.size() * 2 / 3));
    write_text(dir_ / "cut" / "other.txt", "the king sees the sea.\n");
    auto options = options_for(dir_, dir_ / "cut", "data");
    const auto message = error_of(options);
    EXPECT_NE(message.find("cut-" + name + ": the "), std::string::npos) << message;
    EXPECT_NE(message.find("ends early (a truncated file?)"), std::string::npos) << message;
    options.skip_bad_records = 1;
    const auto summary = prepare_corpus(options);
    EXPECT_EQ(summary.bad_records, 1u) << name;
    EXPECT_EQ(summary.documents, 2u) << name;  // what was read before the cut, and the other file
    std::filesystem::remove_all(dir_ / "cut");
    std::filesystem::remove_all(dir_ / "data");
  }
}

TEST_F(corpus_formats, an_invalid_utf8_line_is_skipped_when_allowed_and_the_document_kept) {
  write_text(dir_ / "bert.txt", "the old sailor.\nthe caf\xe9 sailor.\nthe king.\n\na whale.\n");
  auto options = options_for(dir_, dir_ / "bert.txt", "data");
  options.format = corpus_format::blank_line;
  EXPECT_NE(error_of(options).find("bert.txt:2: invalid UTF-8 at byte 8"), std::string::npos);
  options.skip_bad_records = 1;
  const auto summary = prepare_corpus(options);
  EXPECT_EQ(summary.bad_records, 1u);
  EXPECT_EQ(summary.documents, 2u);
}

TEST_F(corpus_formats, duplicates_are_dropped_and_counted_and_a_split_never_splits_them) {
  auto docs = documents();
  docs.push_back(docs[0]);
  docs.push_back(docs[2]);
  docs.push_back(docs[0]);
  write_text(dir_ / "bert.txt", bert_format(docs));
  auto options = options_for(dir_, dir_ / "bert.txt", "data");
  options.format = corpus_format::blank_line;
  options.drop_duplicates = true;
  const auto summary = prepare_corpus(options);
  EXPECT_EQ(summary.duplicates, 3u);
  EXPECT_EQ(summary.documents, documents().size());
  EXPECT_EQ(shards_of(dir_ / "data"), [&] {
    write_text(dir_ / "unique.txt", bert_format(documents()));
    auto unique = options_for(dir_, dir_ / "unique.txt", "unique");
    unique.format = corpus_format::blank_line;
    prepare_corpus(unique);
    return shards_of(dir_ / "unique");
  }());
}

TEST_F(corpus_formats, a_small_corpus_still_gets_a_validation_document) {
  write_text(dir_ / "bert.txt", bert_format({documents()[0], documents()[1]}));
  auto options = options_for(dir_, dir_ / "bert.txt", "data");
  options.format = corpus_format::blank_line;
  options.validation_fraction = 1e-9;  // no key falls below it
  const auto summary = prepare_corpus(options);
  EXPECT_EQ(summary.documents, 2u);
  EXPECT_GT(summary.validation_sequences, 0u);
  EXPECT_GT(summary.train_sequences, 0u);
}

TEST_F(corpus_formats, a_large_document_streams_in_parts_under_one_key) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the old sailor saw the whale number " + std::to_string(i) + ".\n";
  write_text(dir_ / "big.txt", text);
  document_reader_options small;
  small.batch_bytes = 1000;
  small.hold_bytes = 4000;
  document_reader reader({dir_ / "big.txt"}, small);
  std::vector<text_part> parts;
  for (auto batch = reader.next_batch(); !batch.empty(); batch = reader.next_batch())
    for (auto& part : batch) parts.push_back(std::move(part));
  ASSERT_GT(parts.size(), 10u);
  document_key first_hold;
  std::size_t lines = 0;
  for (std::size_t p = 0; p < parts.size(); ++p) {
    EXPECT_EQ(parts[p].first, p == 0);
    EXPECT_EQ(parts[p].last, p + 1 == parts.size());
    EXPECT_EQ(parts[p].key, parts[0].key);
    for (const auto& line : parts[p].lines)
      if (first_hold.bytes() < small.hold_bytes) first_hold.add_line(line);
    lines += parts[p].lines.size();
  }
  EXPECT_EQ(lines, 400u);
  EXPECT_EQ(parts[0].key, first_hold.value());  // the hash of the text held before it was fixed
  EXPECT_GE(parts[0].lines.size() * 40, small.hold_bytes);
  EXPECT_EQ(reader.bytes_read(), reader.total_bytes());
}

TEST_F(corpus_formats, an_interrupted_preparation_says_how_far_it_got_and_writes_nothing) {
  troupe::testing::write_toy_corpus(dir_ / "corpus", 4, 10, 1);
  auto options = options_for(dir_, dir_ / "corpus", "data");
  options.interrupted = [] { return true; };
  const auto message = error_of(options);
  EXPECT_NE(message.find("interrupted after 0.0 of"), std::string::npos) << message;
  EXPECT_NE(message.find("nothing was written to"), std::string::npos) << message;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "data"));
}

}  // namespace
}  // namespace troupe::io
