// SQuAD files in the official format (made here: SQuAD itself cannot be fetched) read as the
// official scripts read them, their errors naming file, record and field, and whole sets scored
// with the scripts' rules (numbers worked out by hand).
#include <gtest/gtest.h>

#include "io/data/squad_evaluation.hpp"
#include "io/data/squad_file.hpp"
#include "messages/error.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::io {
namespace {

using nlohmann::json;

json v1_file() {
  return json::parse(R"({"version": "1.1", "data": [{"title": "Super_Bowl_50", "paragraphs": [
    {"context": "Super Bowl 50 was won by the Denver Broncos.",
     "qas": [{"id": "q1", "question": "Who won?", "answers": [{"text": "Denver Broncos", "answer_start": 29},
                                                              {"text": "the Denver Broncos", "answer_start": 25}]},
             {"id": "q2", "question": "Which Super Bowl?", "answers": [{"text": "Super Bowl 50", "answer_start": 0}]}]}]}]})");
}

json v2_file() {
  auto file = v1_file();
  file["version"] = "v2.0";
  file["data"][0]["paragraphs"][0]["qas"].push_back(
      {{"id", "q3"}, {"question", "Who lost?"}, {"answers", json::array()}, {"is_impossible", true},
       {"plausible_answers", {{{"text", "Broncos"}, {"answer_start", 36}}}}});
  return file;
}

std::string error_of(const json& file) {
  try {
    parse_squad(file, "dev.json");
  } catch (const troupe::error& e) {
    return e.what();
  }
  return "";
}

TEST(Squad, ReadsVersionOneAndTwo) {
  const auto v1 = parse_squad(v1_file(), "dev-v1.1.json");
  EXPECT_EQ(v1.version, squad_version::v1_1);
  ASSERT_EQ(v1.questions.size(), 2u);
  EXPECT_EQ(v1.questions[0].answers[1].text, "the Denver Broncos");
  EXPECT_EQ(v1.questions[0].answers[1].start, 25);
  EXPECT_EQ(v1.questions[1].context, "Super Bowl 50 was won by the Denver Broncos.");
  const auto v2 = parse_squad(v2_file(), "dev-v2.0.json");
  EXPECT_EQ(v2.version, squad_version::v2_0);
  EXPECT_TRUE(v2.questions[2].impossible);
}

TEST(Squad, ReadsAFileAndNamesOneThatIsNot) {
  testing::temp_dir dir("troupe-squad");
  testing::write_text(dir.path() / "dev.json", v1_file().dump());
  EXPECT_EQ(read_squad_file(dir.path() / "dev.json").questions.size(), 2u);
  testing::write_text(dir.path() / "broken.json", "{\"data\": [");
  EXPECT_THROW(read_squad_file(dir.path() / "broken.json"), troupe::error);
  EXPECT_THROW(read_squad_file(dir.path() / "absent.json"), troupe::error);
}

TEST(Squad, EachFlawNamesFileRecordAndField) {
  auto no_data = v1_file();
  no_data.erase("data");
  EXPECT_NE(error_of(no_data).find("dev.json: the file: data: expected a list"), std::string::npos);
  auto no_context = v1_file();
  no_context["data"][0]["paragraphs"][0].erase("context");
  EXPECT_NE(error_of(no_context).find("data[0].paragraphs[0]: context: expected a string"), std::string::npos);
  auto bad_start = v1_file();
  bad_start["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] = "0";
  EXPECT_NE(error_of(bad_start).find("data[0].paragraphs[0].qas[1] (id q2): answers[0].answer_start: expected a "
                                     "character offset"),
            std::string::npos)
      << error_of(bad_start);
  auto no_answers = v1_file();
  no_answers["data"][0]["paragraphs"][0]["qas"][0]["answers"] = json::array();
  EXPECT_NE(error_of(no_answers).find("(id q1): answers: expected at least one answer"), std::string::npos);
  auto twice = v1_file();
  twice["data"][0]["paragraphs"][0]["qas"][1]["id"] = "q1";
  EXPECT_NE(error_of(twice).find("id q1 is used twice"), std::string::npos);
  auto impossible = v2_file();
  impossible["data"][0]["paragraphs"][0]["qas"][2]["is_impossible"] = "yes";
  EXPECT_NE(error_of(impossible).find("(id q3): is_impossible: expected true or false"), std::string::npos);
}

// v1.1: q1 "Broncos" → exact 0, F1 max(2/3 vs [denver broncos], 2/3 vs [denver broncos] after
// "the" goes) = 2/3; q2 missing → 0 and counted. Totals over 2: exact 0, F1 33.33.
TEST(Squad, VersionOneMeansOverEveryQuestion) {
  const auto score = evaluate_squad(parse_squad(v1_file(), "v1"), {{"q1", "Broncos"}});
  EXPECT_EQ(score.all.total, 2);
  EXPECT_EQ(score.missing, 1);
  EXPECT_DOUBLE_EQ(score.all.exact, 0.0);
  EXPECT_DOUBLE_EQ(score.all.f1, 100.0 / 3.0);
  EXPECT_FALSE(score.has_answer);
  const auto right = evaluate_squad(parse_squad(v1_file(), "v1"), {{"q1", "the Denver Broncos!"}, {"q2", "Super Bowl 50"}});
  EXPECT_DOUBLE_EQ(right.all.exact, 100.0);
  EXPECT_DOUBLE_EQ(right.all.f1, 100.0);
}

// v2.0: q1 right, q2 wrong ("Denver" vs "Super Bowl 50": 0), q3 unanswerable answered "" → 1.
// All: exact 2/3, F1 2/3; HasAns (q1, q2): 50 / 50; NoAns (q3): 100 / 100.
TEST(Squad, VersionTwoSplitsAnswerableFromUnanswerable) {
  const auto dataset = parse_squad(v2_file(), "v2");
  const auto score = evaluate_squad(dataset, {{"q1", "Denver Broncos"}, {"q2", "Denver"}, {"q3", ""}});
  EXPECT_EQ(score.all.total, 3);
  EXPECT_DOUBLE_EQ(score.all.exact, 200.0 / 3.0);
  EXPECT_DOUBLE_EQ(score.all.f1, 200.0 / 3.0);
  ASSERT_TRUE(score.has_answer && score.no_answer);
  EXPECT_EQ(score.has_answer->total, 2);
  EXPECT_DOUBLE_EQ(score.has_answer->exact, 50.0);
  EXPECT_EQ(score.no_answer->total, 1);
  EXPECT_DOUBLE_EQ(score.no_answer->f1, 100.0);
}

// v2.0's no-answer threshold: q3 answered "Broncos" (wrong) but its no-answer probability 0.9 >
// 0.5 turns it into "no answer" (right); q1's 0.7 > 0.5 turns a right answer wrong; q2 missing is
// left out of every total.
TEST(Squad, VersionTwoNoAnswerThreshold) {
  const auto dataset = parse_squad(v2_file(), "v2");
  const auto score = evaluate_squad(dataset, {{"q1", "Denver Broncos"}, {"q3", "Broncos"}}, {{"q1", 0.7}, {"q3", 0.9}}, 0.5);
  EXPECT_EQ(score.missing, 1);
  EXPECT_EQ(score.all.total, 2);
  EXPECT_DOUBLE_EQ(score.all.exact, 50.0);
  EXPECT_DOUBLE_EQ(score.has_answer->exact, 0.0);
  EXPECT_DOUBLE_EQ(score.no_answer->exact, 100.0);
}

// evaluate-v2.0.py --na-prob-file's best threshold, by hand. q1 right (p 0.2), q2 "Super Bowl"
// for "Super Bowl 50" (exact 0, F1 0.8; p 0.3), q3 unanswerable answered "Broncos" (p 0.4).
// Start: the one unanswerable question right = 1. Exact: q1 → 2 (best, at 0.2), q2 → 2, q3 → 1:
// 2 of 3. F1: q1 → 2, q2 → 2.8 (best, at 0.3), q3 → 1.8: 2.8 of 3.
TEST(Squad, VersionTwoBestThresholdAsTheScriptFindsIt) {
  const auto dataset = parse_squad(v2_file(), "v2");
  const auto score = evaluate_squad(dataset, {{"q1", "Denver Broncos"}, {"q2", "Super Bowl"}, {"q3", "Broncos"}},
                                    {{"q1", 0.2}, {"q2", 0.3}, {"q3", 0.4}});
  ASSERT_TRUE(score.best);
  EXPECT_DOUBLE_EQ(score.best->exact, 200.0 / 3.0);
  EXPECT_DOUBLE_EQ(score.best->exact_threshold, 0.2);
  EXPECT_DOUBLE_EQ(score.best->f1, 280.0 / 3.0);
  EXPECT_DOUBLE_EQ(score.best->f1_threshold, 0.3);
  EXPECT_DOUBLE_EQ(score.all.f1, 60.0);  // no probability above the default 1.0: the raw scores

  // Never beaten: answering q3 loses a point, q1's "" gains none; 1 of the 2 predicted, at 0.
  const auto worse = evaluate_squad(dataset, {{"q1", ""}, {"q3", "Broncos"}}, {{"q1", 0.9}, {"q3", 0.1}});
  ASSERT_TRUE(worse.best);
  EXPECT_DOUBLE_EQ(worse.best->exact, 50.0);
  EXPECT_DOUBLE_EQ(worse.best->exact_threshold, 0.0);
  EXPECT_FALSE(evaluate_squad(dataset, {{"q1", "Denver Broncos"}}).best);  // without probabilities
}

}  // namespace
}  // namespace troupe::io
