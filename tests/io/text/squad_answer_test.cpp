// SQuAD answer matching against hand-computed cases, one or more per rule of the official
// evaluation scripts (io/text/squad_answer.hpp).
#include "io/text/squad_answer.hpp"

#include <gtest/gtest.h>

#include "messages/error.hpp"

namespace troupe::io {
namespace {

constexpr auto v1 = squad_version::v1_1;
constexpr auto v2 = squad_version::v2_0;

TEST(SquadAnswer, LowerCaseUnicodeToo) {
  EXPECT_EQ(normalize_squad_answer("Denver Broncos"), "denver broncos");
  EXPECT_EQ(normalize_squad_answer("ÉCOLE Ἀθῆναι"), "école ἀθῆναι");
}

TEST(SquadAnswer, AsciiPunctuationGoesUnicodePunctuationStays) {
  EXPECT_EQ(normalize_squad_answer("U.S. (1776)!"), "us 1776");
  EXPECT_EQ(normalize_squad_answer("rock-'n'-roll"), "rocknroll");
  EXPECT_EQ(normalize_squad_answer("«quoted»"), "«quoted»");  // not in string.punctuation
  EXPECT_EQ(normalize_squad_answer("snake_case"), "snakecase");  // '_' is
}

TEST(SquadAnswer, ArticlesOnlyBetweenWordBoundaries) {
  EXPECT_EQ(normalize_squad_answer("The Broncos"), "broncos");
  EXPECT_EQ(normalize_squad_answer("an apple a day"), "apple day");
  EXPECT_EQ(normalize_squad_answer("theory and anthem"), "theory and anthem");
  EXPECT_EQ(normalize_squad_answer("the-end"), "theend");  // the hyphen goes first, then no boundary
  EXPECT_EQ(normalize_squad_answer("the—end"), "—end");    // an em dash is no word character
  EXPECT_EQ(normalize_squad_answer("a a a"), "");
  EXPECT_EQ(normalize_squad_answer("thé"), "thé");         // é is a word character
}

TEST(SquadAnswer, WhitespaceCollapses) {
  EXPECT_EQ(normalize_squad_answer("  Denver \t Broncos\n"), "denver broncos");
  EXPECT_EQ(normalize_squad_answer("Denver\u00a0Broncos"), "denver broncos");  // no-break space splits in Python
}

TEST(SquadAnswer, ExactMatchAfterNormalising) {
  EXPECT_EQ(squad_exact_match("the Denver Broncos.", "Denver Broncos"), 1.0);
  EXPECT_EQ(squad_exact_match("Denver", "Denver Broncos"), 0.0);
}

TEST(SquadAnswer, F1OverCommonWords) {
  // [denver broncos won] vs [denver broncos]: P 2/3, R 1.
  EXPECT_DOUBLE_EQ(squad_f1("the Denver Broncos won", "Denver Broncos", v1), 0.8);
  // Multisets: [x x y] vs [x y y] share one x and one y.
  EXPECT_DOUBLE_EQ(squad_f1("x x y", "x y y", v1), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(squad_f1("Carolina Panthers", "Denver Broncos", v1), 0.0);
}

TEST(SquadAnswer, EmptyAnswersDifferBetweenVersions) {
  EXPECT_EQ(squad_f1("", "Denver", v1), 0.0);
  EXPECT_EQ(squad_f1("the", "", v1), 0.0);  // v1.1: no common word, 0
  EXPECT_EQ(squad_f1("the", "", v2), 1.0);  // v2.0: both empty, 1
  EXPECT_EQ(squad_f1("", "Denver", v2), 0.0);
}

TEST(SquadAnswer, BestOverTheGoldAnswers) {
  const auto match = best_squad_match("Broncos", {"Denver Broncos", "the Broncos"}, v1);
  EXPECT_EQ(match.exact, 1.0);
  EXPECT_EQ(match.f1, 1.0);
  const auto partial = best_squad_match("Denver", {"Denver Broncos", "Broncos"}, v1);
  EXPECT_EQ(partial.exact, 0.0);
  EXPECT_DOUBLE_EQ(partial.f1, 2.0 / 3.0);
  EXPECT_EQ(best_squad_match("Denver", {}, v1).f1, 0.0);
}

TEST(SquadAnswer, UnanswerableQuestionsOfVersionTwo) {
  // Golds that normalise to nothing are dropped; none left: the answer is "".
  EXPECT_EQ(best_squad_match("", {}, v2).exact, 1.0);
  EXPECT_EQ(best_squad_match("", {"The", "."}, v2).f1, 1.0);
  EXPECT_EQ(best_squad_match("Denver", {}, v2).f1, 0.0);
}

TEST(SquadAnswer, BytesThatAreNotUtf8AreNamed) {
  EXPECT_THROW(normalize_squad_answer(std::string("ab\xff", 3)), troupe::error);
}

}  // namespace
}  // namespace troupe::io
