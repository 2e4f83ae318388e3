// SQuAD questions turned into windows and labels as run_squad.py does, and logits back into
// answers as its compute_predictions_logits does. Every expected value is worked out by hand
// from run_squad.py's code (the comments show the working).
#include <gtest/gtest.h>

#include "io/data/squad_features.hpp"
#include "io/data/squad_predictions.hpp"
#include "io/text/wordpiece_tokenizer.hpp"
#include "tests/support/error_text.hpp"

namespace troupe::io {
namespace {

using troupe::testing::expect_error;

/// [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, then `extra` from 5.
wordpiece_tokenizer vocabulary(std::vector<std::string> extra) {
  std::vector<std::string> vocab{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  vocab.insert(vocab.end(), extra.begin(), extra.end());
  return wordpiece_tokenizer(vocab, {true, 100}, "test vocab");
}

// who=5 wrote=6 it=7 ?=8 herman=9 mel=10 ##ville=11 moby=12 dick=13 in=14 1851=15 .=16
wordpiece_tokenizer melville_vocabulary() {
  return vocabulary({"who", "wrote", "it", "?", "herman", "mel", "##ville", "moby", "dick", "in", "1851", "."});
}

squad_question question(std::string context, std::string text, int64_t start, std::string ask = "who wrote it ?") {
  squad_question q;
  q.id = "q-7";
  q.question = std::move(ask);
  q.context = std::move(context);
  q.answers.push_back({std::move(text), start});
  return q;
}

const char* melville = "Herman Melville wrote Moby Dick in 1851.";

TEST(squad_features, the_context_splits_on_whitespace_and_every_character_knows_its_word) {
  const auto split = split_squad_context(" Herman  Mel\tv\u202Fx");
  EXPECT_EQ(split.words, (std::vector<std::string>{"Herman", "Mel", "v", "x"}));
  // A leading space has no word before it (-1); a space belongs to the word before it.
  EXPECT_EQ(split.word_of_char,
            (std::vector<int64_t>{-1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3}));
}

TEST(squad_features, one_window_holds_cls_question_sep_context_sep_and_the_answer_labels) {
  const auto tokens = melville_vocabulary();
  const auto features = make_squad_features(question(melville, "Herman Melville", 0), 4, tokens, {}, true);
  ASSERT_EQ(features.size(), 1u);
  const auto& f = features[0];
  EXPECT_EQ(f.question, 4u);
  EXPECT_EQ(f.input_ids, (std::vector<int32_t>{2, 5, 6, 7, 8, 3, 9, 10, 11, 6, 12, 13, 14, 15, 16, 3}));
  EXPECT_EQ(f.token_types, (std::vector<int8_t>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(f.context_offset, 6);
  EXPECT_EQ(f.word_of_piece, (std::vector<int64_t>{0, 1, 1, 2, 3, 4, 5, 6, 6}));
  EXPECT_EQ(f.max_context, std::vector<uint8_t>(9, 1));
  EXPECT_FALSE(f.impossible);
  EXPECT_EQ(f.start_position, 6);  // herman
  EXPECT_EQ(f.end_position, 8);    // ##ville
  // "1851" starts at character 35 inside the word "1851."; the span narrows to its own piece.
  const auto year = make_squad_features(question(melville, "1851", 35), 0, tokens, {}, true);
  ASSERT_EQ(year.size(), 1u);
  EXPECT_EQ(year[0].start_position, 13);
  EXPECT_EQ(year[0].end_position, 13);
}

TEST(squad_features, the_answer_span_narrows_to_the_answer_texts_own_pieces) {
  const auto tokens = vocabulary({"it", "was", "(", "1990", ")", ",", "really", ".", "when", "?"});
  // Words: It was (1990), really.  "1990" (characters 8..11) lies in word 2, pieces ( 1990 ) ,
  const auto features =
      make_squad_features(question("It was (1990), really.", "1990", 8, "when ?"), 0, tokens, {}, true);
  ASSERT_EQ(features.size(), 1u);
  // [CLS] when ? [SEP] → offset 4; pieces: it was ( 1990 ) , really . → 1990 is piece 3.
  EXPECT_EQ(features[0].start_position, 7);
  EXPECT_EQ(features[0].end_position, 7);
  // An answer text that its words do not contain: run_squad.py skips the question when training.
  squad_dataset set;
  set.questions.push_back(question("It was (1990), really.", "nineteen", 8, "when ?"));
  int64_t skipped = 0;
  EXPECT_TRUE(make_squad_features(set, tokens, {}, true, &skipped).empty());
  EXPECT_EQ(skipped, 1);
  // For prediction the same question keeps its window.
  EXPECT_EQ(make_squad_features(set, tokens, {}, false).size(), 1u);
}

TEST(squad_features, long_contexts_give_windows_doc_stride_apart_with_max_context_pieces) {
  std::vector<std::string> words{"q"};
  std::string context;
  for (int i = 0; i < 10; ++i) {
    words.push_back("b" + std::to_string(i));
    context += (i ? " b" : "b") + std::to_string(i);
  }
  const auto tokens = vocabulary(words);
  squad_feature_settings settings{9, 2, 1};  // context room 9 − 3 − 1 = 5 pieces
  // "b5" starts at character 15.
  const auto features = make_squad_features(question(context, "b5", 15, "q"), 0, tokens, settings, true);
  // Windows [0,4] [2,6] [4,8] [6,9]: the last one reaches piece 9.
  ASSERT_EQ(features.size(), 4u);
  const std::vector<std::vector<int64_t>> pieces{{0, 1, 2, 3, 4}, {2, 3, 4, 5, 6}, {4, 5, 6, 7, 8}, {6, 7, 8, 9}};
  // Score min(left, right) + 0.01 × length: p3 ties windows 0 and 1 (1.05) → the first; p7 is
  // 1.05 in window 2 vs 1.04 in window 3.
  const std::vector<std::vector<uint8_t>> max_context{{1, 1, 1, 1, 0}, {0, 0, 1, 1, 0}, {0, 0, 1, 1, 0}, {0, 0, 1, 1}};
  for (std::size_t w = 0; w < 4; ++w) {
    EXPECT_EQ(features[w].window, static_cast<int64_t>(w));
    EXPECT_EQ(features[w].word_of_piece, pieces[w]) << "window " << w;
    EXPECT_EQ(features[w].max_context, max_context[w]) << "window " << w;
    EXPECT_EQ(features[w].input_ids.size(), pieces[w].size() + 4);
  }
  // b5 is piece 5: inside windows 1 and 2 (position 5 − start + 3), [CLS] elsewhere.
  EXPECT_TRUE(features[0].impossible);
  EXPECT_EQ(features[0].start_position, 0);
  EXPECT_EQ(features[1].start_position, 6);
  EXPECT_EQ(features[2].start_position, 4);
  EXPECT_EQ(features[2].end_position, 4);
  EXPECT_TRUE(features[3].impossible);
  EXPECT_EQ(features[3].end_position, 0);
}

TEST(squad_features, unanswerable_questions_point_at_cls_and_bad_input_is_named) {
  const auto tokens = melville_vocabulary();
  auto none = question(melville, "", 0);
  none.answers.clear();
  none.impossible = true;
  const auto features = make_squad_features(none, 0, tokens, {}, true);
  ASSERT_EQ(features.size(), 1u);
  EXPECT_TRUE(features[0].impossible);
  EXPECT_EQ(features[0].start_position, 0);
  expect_error([&] { make_squad_features(question(melville, "1851", 99), 0, tokens, {}, true); },
               "SQuAD question q-7: answers[0] (answer_start 99");
  expect_error([] { check_squad_feature_settings({384, 400, 64}); }, "doc_stride: expected ≤ max_seq_length");
  expect_error([] { check_squad_feature_settings({384, 128, 0}); }, "max_query_length: expected ≥ 1");
}

TEST(squad_predictions, final_text_maps_the_pieces_back_onto_the_original_characters) {
  EXPECT_EQ(final_answer_text("1990", "(1990),", true), "1990");
  EXPECT_EQ(final_answer_text("steve smith", "Steve Smith's", true), "Steve Smith");  // run_squad.py's example
  EXPECT_EQ(final_answer_text("cafe", "Café!", true), "Café");  // accents stripped, same length
  EXPECT_EQ(final_answer_text("ritz", "Savoy", true), "Savoy");  // not found: the words as they are
}

/// The Melville window padded to 18 positions, as run_squad.py pads every window.
struct melville_window {
  wordpiece_tokenizer tokens = melville_vocabulary();
  squad_question q = question(melville, "Herman Melville", 0);
  squad_feature feature = make_squad_features(q, 0, tokens, {}, false).at(0);
  squad_window_logits logits{std::vector<float>(18, 0.f), std::vector<float>(18, 0.f)};
  melville_window() {
    logits.start[0] = 10;   // [CLS]: not context
    logits.start[16] = 9;   // padding: beyond the window's 16 inputs
    logits.start[6] = 5;    // herman
    logits.start[13] = 4;   // 1851
    logits.end[0] = 10;
    logits.end[8] = 5;      // ##ville
    logits.end[13] = 4.5;
  }
  squad_answer_prediction predict(squad_prediction_settings settings) const {
    return predict_squad_answer(q, {&feature}, {&logits}, {tokens.kind(), tokens.pieces()}, settings);
  }
};

TEST(squad_predictions, the_best_valid_span_wins_and_padding_still_takes_a_slot) {
  const melville_window window;
  const auto best = window.predict({});
  EXPECT_EQ(best.text, "Herman Melville");  // (6, 8): 10
  ASSERT_GE(best.n_best.size(), 3u);
  EXPECT_EQ(best.n_best[1].text, "Herman Melville wrote Moby Dick in 1851");  // (6, 13): 9.5
  EXPECT_EQ(best.n_best[2].text, "1851");                                     // (13, 13): 8.5
  double total = 0;
  for (const auto& c : best.n_best) total += c.probability;
  EXPECT_NEAR(total, 1.0, 1e-12);
  EXPECT_GT(best.n_best[0].probability, best.n_best[1].probability);
  // At most 2 pieces: (13, 13) is the best left.
  squad_prediction_settings short_answers;
  short_answers.max_answer_length = 2;
  EXPECT_EQ(window.predict(short_answers).text, "1851");
  // The two highest start logits are [CLS] and padding: nothing valid is left.
  squad_prediction_settings two_best;
  two_best.n_best_size = 2;
  EXPECT_EQ(window.predict(two_best).text, "empty");
}

TEST(squad_predictions, version_2_answers_nothing_when_the_null_score_leads_by_more_than_the_threshold) {
  const melville_window window;
  squad_prediction_settings v2;
  v2.version_2_with_negative = true;
  const auto none = window.predict(v2);
  EXPECT_EQ(none.text, "");                  // null 10 + 10 = 20 vs 10
  EXPECT_DOUBLE_EQ(none.null_score_diff, 10);
  EXPECT_EQ(none.n_best[0].text, "");
  v2.null_score_diff_threshold = 10.5;
  EXPECT_EQ(window.predict(v2).text, "Herman Melville");
  expect_error([&] {
    predict_squad_answer(window.q, {&window.feature}, {}, {"wordpiece", {}}, v2);
  }, "1 windows but 0 logits");
}

}  // namespace
}  // namespace troupe::io
