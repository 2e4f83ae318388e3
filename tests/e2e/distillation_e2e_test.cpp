// Distillation end to end (issue 11): a tiny BERT teacher trained for a few windows, a
// DistilBERT student distilled from it in one process and across two local nodes (the same
// curve: the loss parts are sums over samples, dropout is keyed by sample), a bitwise rerun, an
// exact resume in the middle, the HF export → import round trip, and the bad inputs refused
// before any work with the config field named.

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <string>

#include "tests/e2e/cluster_job.hpp"

namespace troupe {
namespace {

/// `fill-mask --held-out N --top-k K --seed S --json`: N sentences drawn at random from the
/// validation split (another seed draws others), each with one whole word hidden (all its pieces,
/// at most 3; not punctuation), its truth and K guesses with token_str, score and correct, and
/// whether the unigram baseline's K guesses hold it.
void expect_held_out_contract(const std::string& run) {
  const auto draw = [&](int seed) {
    auto result = run_command(troupe_binary() + " fill-mask --checkpoint " + run + " --held-out 6 --top-k 3 --seed " +
                              std::to_string(seed) + " --json");
    EXPECT_EQ(result.status, 0) << result.output;
    return json::parse(result.output.substr(result.output.find('[')));
  };
  const auto first = draw(1), again = draw(1), other = draw(2);
  ASSERT_EQ(first.size(), 6u);
  EXPECT_EQ(first, again) << "the same seed draws the same sentences and words";
  std::set<int64_t> drawn, drawn_by_other;
  for (const auto& sentence : first) {
    drawn.insert(sentence["sequence"].get<int64_t>());
    const auto truth = sentence["truth"].get<std::string>();
    EXPECT_TRUE(std::any_of(truth.begin(), truth.end(), [](unsigned char c) { return std::isalpha(c); })) << truth;
    EXPECT_NE(truth.rfind("##", 0), 0u) << "a piece of a word was hidden: " << truth;
    EXPECT_GE(sentence["pieces"].get<int>(), 1);
    EXPECT_LE(sentence["pieces"].get<int>(), 3);
    EXPECT_TRUE(sentence["unigram_correct"].is_boolean());
    EXPECT_NE(sentence["context"].get<std::string>().find("[MASK]"), std::string::npos);
    ASSERT_EQ(sentence["guesses"].size(), 3u);
    for (const auto& guess : sentence["guesses"]) {
      EXPECT_TRUE(guess.contains("score"));
      EXPECT_EQ(guess["correct"].get<bool>(), guess["token_str"].get<std::string>() == truth) << guess.dump();
    }
  }
  for (const auto& sentence : other) drawn_by_other.insert(sentence["sequence"].get<int64_t>());
  EXPECT_NE(drawn, drawn_by_other) << "another seed drew the same sentences";
  EXPECT_NE(drawn, (std::set<int64_t>{0, 1, 2, 3, 4, 5})) << "not drawn at random: the first six";
}

class distillation_e2e : public cluster_job_test {
 protected:
  /// The teacher: the cluster tests' 2-layer BERT (hidden 64) trained 12 windows on `data`.
  static std::string train_teacher(const std::string& name, const std::filesystem::path& data) {
    auto c = json::parse(io_text(write_config(12)));
    c["data"]["dir"] = data.string();
    c["checkpoint"]["every_windows"] = 12;
    const auto config = *dir_ / (name + ".json");
    testing::write_text(config, c.dump(2));
    auto run = run_command(troupe_binary() + " train --no-dashboard --config " + config.string() + " --run-dir " +
                           (*dir_ / name).string());
    EXPECT_EQ(run.status, 0) << run.output;
    return (*dir_ / name).string();
  }

  /// A 1-layer DistilBERT student (dropout 0.1) distilled from `teacher`; `changes` is merged
  /// into the config last.
  static std::string student_config(const std::string& name, const std::string& teacher, int64_t steps,
                                    const json& changes = json::object()) {
    auto c = json::parse(io_text(write_config(steps, false, 0.1)));
    c["model"] = {{"type", "distilbert"},       {"hidden_size", 64},         {"num_hidden_layers", 1},
                  {"num_attention_heads", 2},   {"hidden_dropout_prob", 0.1}, {"attention_probs_dropout_prob", 0.1}};
    c["distillation"] = {{"teacher", teacher}};
    c["checkpoint"]["every_windows"] = 4;
    c.merge_patch(changes);
    const auto path = *dir_ / (name + ".json");
    testing::write_text(path, c.dump(2));
    return path.string();
  }

  static json last_metrics_line(const std::string& run) {
    std::ifstream in(*dir_ / run / "metrics.jsonl");
    std::string line, last;
    while (std::getline(in, line)) last = line;
    return json::parse(last);
  }
};

TEST_F(distillation_e2e, a_student_learns_across_nodes_reruns_bitwise_resumes_exactly_and_round_trips_to_hf) {
  const auto teacher = train_teacher("teacher", *dir_ / "data");
  const auto config = student_config("student", teacher, 8);

  auto single = train(config, "single");
  ASSERT_EQ(single.status, 0) << single.output;
  EXPECT_NE(single.output.find("distilling from " + teacher + " (bert 2-layer"), std::string::npos) << single.output;
  const auto reference = read_metrics("single");
  ASSERT_EQ(reference.size(), 8u);
  EXPECT_LT(reference.back().loss, reference.front().loss) << "the distillation loss did not fall";
  const auto first = last_metrics_line("single");
  ASSERT_TRUE(first.contains("loss_parts")) << first.dump();
  // The total is the weighted sum of its parts (HF's defaults: 5 ce + 2 mlm + 1 cos).
  const auto& parts = first["loss_parts"];
  EXPECT_NEAR(first["loss"].get<double>(),
              5 * parts["ce"].get<double>() + 2 * parts["mlm"].get<double>() + parts["cos"].get<double>(), 1e-4);
  EXPECT_NEAR(first["perplexity"].get<double>(), std::exp(parts["mlm"].get<double>()), 1e-3);
  EXPECT_GT(first["ranks"][0]["time"]["teacher"].get<double>(), 0.0);

  const auto manifest = write_manifest(2, "two.json");
  auto two = launch(manifest, config, "two");
  ASSERT_EQ(two.status, 0) << two.output;
  const auto across = read_metrics("two");
  expect_same_curve(reference, across, "2 nodes vs 1 process");
  auto again = launch(manifest, config, "two-again");
  ASSERT_EQ(again.status, 0) << again.output;
  const auto rerun = read_metrics("two-again");
  ASSERT_EQ(rerun.size(), across.size());
  for (std::size_t i = 0; i < rerun.size(); ++i) {
    EXPECT_EQ(rerun[i].loss, across[i].loss) << "window " << i + 1;
    EXPECT_EQ(rerun[i].parameter_hash, across[i].parameter_hash) << "window " << i + 1;
  }

  // 4 windows, stop with a checkpoint, resume for the other 4: the straight run's windows.
  auto part = launch(manifest, config, "resumed", "--max-windows 4");
  ASSERT_EQ(part.status, 0) << part.output;
  auto rest = launch(manifest, config, "resumed", "--resume latest");
  ASSERT_EQ(rest.status, 0) << rest.output;
  const auto resumed = read_metrics("resumed");
  ASSERT_EQ(resumed.size(), across.size());
  for (std::size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_EQ(resumed[i].loss, across[i].loss) << "window " << i + 1;
    EXPECT_EQ(resumed[i].parameter_hash, across[i].parameter_hash) << "window " << i + 1;
  }

  // HF layout: DistilBertForMaskedLM's config and names; imported back, it scores the same.
  const auto hf = *dir_ / "hf-student";
  auto exported = run_command(troupe_binary() + " ckpt export " + (*dir_ / "two").string() + " --to " + hf.string());
  ASSERT_EQ(exported.status, 0) << exported.output;
  const auto hf_config = json::parse(io_text((hf / "config.json").string()));
  EXPECT_EQ(hf_config["model_type"], "distilbert");
  EXPECT_EQ(hf_config["architectures"][0], "DistilBertForMaskedLM");
  EXPECT_EQ(hf_config["dim"], 64);
  EXPECT_EQ(hf_config["n_layers"], 1);
  const auto weights = io_text((hf / "model.safetensors").string());
  for (const char* name : {"distilbert.transformer.layer.0.attention.q_lin.weight", "vocab_projector.bias",
                           "distilbert.embeddings.LayerNorm.weight", "vocab_layer_norm.bias"})
    EXPECT_NE(weights.find(std::string("\"") + name + "\""), std::string::npos) << name;
  EXPECT_EQ(weights.find("token_type"), std::string::npos);
  expect_import_scores_alike(*dir_ / "two", hf, *dir_ / "student-back", *dir_ / "data");
}

// `troupe fill-mask` on a BERT and a DistilBERT checkpoint: HF's pipeline output (per mask, the
// top k by probability with the filled sequence), held-out sentences with a word hidden, and
// texts it cannot fill refused naming why.
TEST_F(distillation_e2e, fill_mask_guesses_for_bert_and_distilbert_checkpoints) {
  const auto teacher = train_teacher("teacher-for-fill-mask", *dir_ / "data");
  const auto student = student_config("student-for-fill-mask", teacher, 2);
  ASSERT_EQ(train(student, "student-for-fill-mask").status, 0);
  for (const auto& run : {teacher, (*dir_ / "student-for-fill-mask").string()}) {
    // The run named by --checkpoint, or (the student) as the first word.
    const std::string named = run == teacher ? " --checkpoint " + run : " " + run;
    auto filled = run_command(troupe_binary() + " fill-mask" + named +
                              " --top-k 4 --json 'the old sailor [MASK] a whale .' 'a [MASK] saw the [MASK] .'");
    ASSERT_EQ(filled.status, 0) << filled.output;
    const auto results = json::parse(filled.output.substr(filled.output.find('[')));
    ASSERT_EQ(results.size(), 2u);
    EXPECT_EQ(results[0]["masks"].size(), 1u);
    EXPECT_EQ(results[1]["masks"].size(), 2u);
    for (const auto& result : results)
      for (const auto& options : result["masks"]) {
        ASSERT_EQ(options.size(), 4u);
        double total = 0, previous = 1;
        for (const auto& option : options) {
          const double score = option["score"].get<double>();
          EXPECT_LE(score, previous) << "not best first";
          previous = score;
          total += score;
          EXPECT_NE(option["sequence"].get<std::string>().find(option["token_str"].get<std::string>()), std::string::npos);
        }
        EXPECT_LE(total, 1.0 + 1e-6);
      }
    EXPECT_EQ(results[0]["masks"][0][0]["sequence"].get<std::string>().find("[MASK]"), std::string::npos);
    EXPECT_NE(results[1]["masks"][0][0]["sequence"].get<std::string>().find("[MASK]"), std::string::npos)
        << "each mask is filled on its own, as HF's pipeline does";

    auto held = run_command(troupe_binary() + " fill-mask --checkpoint " + run + " --held-out 3 --top-k 2 --show 1");
    ASSERT_EQ(held.status, 0) << held.output;
    EXPECT_NE(held.output.find("hidden words found among the model's 2 guesses: "), std::string::npos) << held.output;
    EXPECT_NE(held.output.find("of 3"), std::string::npos) << held.output;
    EXPECT_NE(held.output.find("[MASK]"), std::string::npos) << held.output;
    EXPECT_NE(held.output.find("truth: "), std::string::npos) << held.output;
    EXPECT_EQ(held.output.find("truth: "), held.output.rfind("truth: ")) << "--show 1 prints one sentence";
    expect_held_out_contract(run);
  }
  auto no_mask = run_command(troupe_binary() + " fill-mask --checkpoint " + teacher + " 'no mask here'");
  EXPECT_NE(no_mask.status, 0);
  EXPECT_NE(no_mask.output.find("has no [MASK] to fill"), std::string::npos) << no_mask.output;
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "the whale ";  // 600 tokens; positions: 512
  auto too_long = run_command(troupe_binary() + " fill-mask --checkpoint " + teacher + " '" + long_text + "[MASK]'");
  EXPECT_NE(too_long.status, 0);
  EXPECT_NE(too_long.output.find("the model takes at most"), std::string::npos) << too_long.output;
}

TEST_F(distillation_e2e, bad_teachers_and_layer_lists_are_refused_before_any_work_naming_the_field) {
  const auto teacher = train_teacher("teacher-for-refusals", *dir_ / "data");
  auto refused = [&](const std::string& name, const std::string& t, const json& changes, const std::string& expected) {
    const auto config = student_config(name, t, 2, changes);
    auto result = train(config, name);
    EXPECT_NE(result.status, 0) << name;
    EXPECT_NE(result.output.find(expected), std::string::npos) << name << "\n" << result.output;
    EXPECT_FALSE(std::filesystem::exists(*dir_ / name / "metrics.jsonl")) << name << ": work started";
    const auto manifest = write_manifest(2, name + "-two.json");
    auto launched = launch(manifest, config, name + "-launched");
    EXPECT_NE(launched.status, 0) << name;
    EXPECT_NE(launched.output.find(expected), std::string::npos) << name << " (launch)\n" << launched.output;
  };
  refused("wider", teacher, {{"model", {{"hidden_size", 96}, {"num_attention_heads", 2}}}},
          "model.hidden_size: 96 differs from the teacher's 64");
  refused("unknown-layer", teacher, {{"distillation", {{"teacher_layers", {5}}}}},
          "distillation.teacher_layers[0]: 5 is not a layer of the teacher (0 … 1");
  refused("no-teacher", (*dir_ / "nowhere").string(), json::object(), "distillation.teacher: ");

  // A teacher trained on data tokenized with another vocabulary (one word differs).
  const auto other = *dir_ / "other";
  testing::write_toy_corpus(other / "corpus", 10, 20, 9);
  testing::write_toy_vocab(other / "vocab.txt");
  {
    std::ofstream(other / "vocab.txt", std::ios::app) << "zebra\n";
  }
  auto prepared = run_command(troupe_binary() + " prepare --input " + (other / "corpus").string() +
                              " --tokenizer wordpiece:" + (other / "vocab.txt").string() + " --out " +
                              (other / "data").string() + " --max-seq-length 32");
  ASSERT_EQ(prepared.status, 0) << prepared.output;
  const auto foreign = train_teacher("foreign-teacher", other / "data");
  refused("foreign", foreign, json::object(), "distillation.teacher: its vocabulary has");
}

}  // namespace
}  // namespace troupe
