// `troupe prepare --task squad|classify`: the data directory it writes (shards with task labels,
// the manifest's task and label set) read back through token_dataset, and its refusals.
#include <gtest/gtest.h>

#include "io/config/job_config.hpp"
#include "io/data/task_preparer.hpp"
#include "io/data/token_dataset.hpp"
#include "io/os/scratch_directory.hpp"
#include "tests/support/error_text.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::io {
namespace {

using troupe::testing::expect_error;

struct task_files {
  scratch_directory dir{"task-prepare"};
  std::filesystem::path write(const std::string& name, const std::string& text) {
    const auto path = dir.path() / name;
    troupe::testing::write_text(path, text);
    return path;
  }
  // [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, then the words from 5.
  std::filesystem::path vocab = write("vocab.txt",
                                      "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nwho\nwrote\nit\n?\nherman\nmel\n##ville\nmoby\n"
                                      "dick\nin\n1851\n.\ngood\nbad\nfilm\n");
  task_prepare_options options(const std::string& task, const std::filesystem::path& train) {
    task_prepare_options o;
    o.task = task;
    o.train_file = train;
    o.tokenizer_spec = "wordpiece:" + vocab.string();
    o.out = dir.path() / ("data-" + task);
    return o;
  }
};

const char* squad_json = R"({"version": "1.1", "data": [{"title": "t", "paragraphs": [
  {"context": "Herman Melville wrote Moby Dick in 1851.",
   "qas": [{"id": "a", "question": "who wrote it ?", "answers": [{"text": "Herman Melville", "answer_start": 0}]},
           {"id": "b", "question": "who ?", "answers": [{"text": "Ahab", "answer_start": 16}]},
           {"id": "c", "question": "in ?", "answers": [{"text": "1851", "answer_start": 35}]}]}]}]})";

TEST(task_preparer, squad_windows_become_sequences_labelled_with_the_answer_positions) {
  task_files files;
  const auto train = files.write("train.json", squad_json);
  auto options = files.options("squad", train);
  options.validation_file = train;
  const auto summary = prepare_task_data(options);
  EXPECT_EQ(summary.train_examples, 2u);  // "b": Ahab is not in its context, skipped
  EXPECT_EQ(summary.skipped, 2u);         // once per split
  const token_dataset data(options.out, "train");
  EXPECT_EQ(data.manifest().fine_tuning_task, "squad");
  EXPECT_EQ(data.manifest().max_seq_length, 384u);
  ASSERT_EQ(data.size(), 2u);
  const auto first = data.sequence(0);
  EXPECT_EQ(first.length, 16);        // [CLS] who wrote it ? [SEP] 9 pieces [SEP]
  EXPECT_EQ(first.type_boundary, 6);  // the context's first piece
  EXPECT_EQ(first.task_labels, (std::array<int32_t, 2>{6, 8}));
  EXPECT_EQ(data.sequence(1).task_labels, (std::array<int32_t, 2>{11, 11}));  // [CLS] in ? [SEP] → 1851 at 4 + 7
  EXPECT_EQ(token_dataset(options.out, "validation").size(), 2u);
  // A pretraining job refuses such data, naming it.
  job_config config;
  config.data.dir = options.out;
  expect_error([&] { reconcile_with_data(config, data.manifest(), "job.json"); },
               "job.json: data.dir: " + (options.out / "manifest.json").string() + " holds squad fine-tuning examples");
}

TEST(task_preparer, classification_examples_carry_their_class_and_the_label_set_is_stored) {
  task_files files;
  const auto train = files.write("train.jsonl", "{\"sentence\": \"good film\", \"label\": \"positive\"}\n"
                                                "{\"sentence\": \"bad film\", \"label\": \"negative\"}\n");
  const auto dev = files.write("dev.jsonl", "{\"sentence\": \"bad\", \"label\": \"negative\"}\n");
  auto options = files.options("classify", train);
  options.validation_file = dev;
  const auto summary = prepare_task_data(options);
  EXPECT_EQ(summary.labels, (std::vector<std::string>{"negative", "positive"}));
  const token_dataset data(options.out, "train");
  EXPECT_EQ(data.manifest().labels, summary.labels);
  EXPECT_EQ(data.manifest().max_seq_length, 128u);
  EXPECT_EQ(data.sequence(0).task_labels, (std::array<int32_t, 2>{1, 0}));
  EXPECT_EQ(data.sequence(1).task_labels, (std::array<int32_t, 2>{0, 0}));
  EXPECT_EQ(data.sequence(1).length, 4);         // [CLS] bad film [SEP]
  EXPECT_EQ(data.sequence(1).type_boundary, 4);  // no second sentence
  EXPECT_EQ(token_dataset(options.out, "validation").sequence(0).task_labels, (std::array<int32_t, 2>{0, 0}));
}

TEST(task_preparer, bad_options_and_files_are_refused_before_anything_is_written) {
  task_files files;
  const auto train = files.write("train.jsonl", "{\"sentence\": \"good\", \"label\": \"positive\"}\n");
  auto one_label = files.options("classify", train);
  expect_error([&] { prepare_task_data(one_label); }, "train.jsonl: label: expected at least 2 distinct labels");
  EXPECT_FALSE(std::filesystem::exists(one_label.out));
  auto spec = files.options("classify", train);
  spec.tokenizer_spec = "sentencepiece:100";
  expect_error([&] { prepare_task_data(spec); }, "--tokenizer: expected data:DIR");
  auto stride = files.options("squad", files.write("s.json", squad_json));
  stride.doc_stride = 400;
  expect_error([&] { prepare_task_data(stride); }, "doc_stride: expected ≤ max_seq_length");
  auto unknown = files.options("ner", train);
  expect_error([&] { prepare_task_data(unknown); }, "--task: expected squad or classify");
  auto bad_dev = files.options("classify", files.write("two.jsonl", "{\"sentence\": \"good\", \"label\": \"positive\"}\n"
                                                                    "{\"sentence\": \"bad\", \"label\": \"negative\"}\n"));
  bad_dev.validation_file = files.write("dev.jsonl", "{\"sentence\": \"meh\", \"label\": \"neutral\"}\n");
  expect_error([&] { prepare_task_data(bad_dev); }, "dev.jsonl: line 1: label: \"neutral\" is not one of");
  EXPECT_FALSE(std::filesystem::exists(bad_dev.out));
}

}  // namespace
}  // namespace troupe::io
