// Fine-tuning end to end (issue 25): a tiny BERT pretrained for a few windows, then fine-tuned
// for sentence classification and for SQuAD-style question answering through `troupe train`
// and `troupe launch` — one process and two nodes on the same curve, an exact resume, the
// task's scores from `troupe eval`, `troupe predict`, the HF export (the task class's config
// and names) imported back to the same scores — and the bad task configs refused before any
// work, naming the field.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/cluster_job.hpp"

namespace troupe {
namespace {

/// Toy sentences whose label is decided by the adjective ("good" for brave, great, young and
/// quiet; "bad" for old, tired, small and dark): learnable in a few windows.
void write_classification_file(const std::filesystem::path& file, int examples, uint64_t seed) {
  const char* adjectives[] = {"brave", "great", "young", "quiet", "old", "tired", "small", "dark"};
  const char* nouns[] = {"sailor", "captain", "whale", "ship", "king", "river", "city", "bird"};
  const char* places[] = {"sea", "harbor", "north", "storm", "night", "morning"};
  std::string text;
  uint64_t state = seed;
  const auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  for (int i = 0; i < examples; ++i) {
    const auto adjective = next(8);
    const std::string sentence = std::string("the ") + adjectives[adjective] + " " + nouns[next(8)] + " sees the " +
                                 nouns[next(8)] + " in the " + places[next(6)] + " .";
    text += json{{"sentence", sentence}, {"label", adjective < 4 ? "good" : "bad"}}.dump() + "\n";
  }
  testing::write_text(file, text);
}

/// A SQuAD file of toy paragraphs: "who finds the whale ?" answered by "the brave sailor". With
/// `impossible`, v2.0: every third question asks about a noun the paragraph does not have.
void write_squad_file(const std::filesystem::path& file, int paragraphs, uint64_t seed, bool impossible = false) {
  const char* adjectives[] = {"brave", "great", "young", "quiet", "old", "tired", "small", "dark"};
  const char* nouns[] = {"sailor", "captain", "whale", "ship", "king", "river", "city", "bird"};
  const char* verbs[] = {"sees", "follows", "loves", "fears", "finds", "watches"};
  uint64_t state = seed;
  const auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  json data = json::array();
  for (int p = 0; p < paragraphs; ++p) {
    std::string context;
    json qas = json::array();
    for (int s = 0; s < 3; ++s) {
      const std::string subject = std::string("the ") + adjectives[next(8)] + " " + nouns[next(8)];
      const std::string verb = verbs[(p + s) % 6], object = nouns[(p * 3 + s) % 8];
      const auto start = context.size();
      context += subject + " " + verb + " the " + object + " in the sea . ";
      json question = {{"id", "q" + std::to_string(p) + "-" + std::to_string(s)},
                       {"question", "who " + verb + " the " + object + " ?"},
                       {"answers", json::array({{{"text", subject}, {"answer_start", start}}})}};
      if (impossible && s == 2) {
        question["question"] = std::string("who ") + verb + " the king ?";
        question["answers"] = json::array();
        question["is_impossible"] = true;
      }
      qas.push_back(question);
    }
    data.push_back({{"title", "toy"}, {"paragraphs", json::array({{{"context", context}, {"qas", qas}}})}});
  }
  testing::write_text(file, json{{"version", impossible ? "v2.0" : "1.1"}, {"data", data}}.dump());
}

class fine_tuning_e2e : public cluster_job_test {
 protected:
  /// The pretrained model: the cluster tests' 2-layer BERT (hidden 64) trained 12 windows, or
  /// the same shape as `model_type` (ALBERT with 32-wide embeddings, masked-LM alone).
  static std::string pretrain(const std::string& model_type = "bert") {
    const auto suffix = model_type == "bert" ? std::string() : "-" + model_type;
    const auto run = *dir_ / ("pretrained" + suffix);
    if (std::filesystem::exists(run / "checkpoints" / "latest")) return run.string();
    auto c = json::parse(io_text(write_config(12)));
    c["checkpoint"]["every_windows"] = 12;
    c["model"]["type"] = model_type;
    if (model_type == "albert") c["model"].merge_patch({{"embedding_size", 32}, {"sentence_order_prediction", false}});
    const auto config = *dir_ / ("pretrain" + suffix + ".json");
    testing::write_text(config, c.dump(2));
    auto result = run_command(troupe_binary() + " train --no-dashboard --config " + config.string() + " --run-dir " +
                              run.string());
    EXPECT_EQ(result.status, 0) << result.output;
    return run.string();
  }

  static std::string prepare(const std::string& task, const std::string& name, const std::string& train,
                             const std::string& validation, const std::string& extra) {
    const auto out = *dir_ / name;
    if (std::filesystem::exists(out / "manifest.json")) return out.string();
    auto result = run_command(troupe_binary() + " prepare --task " + task + " --input " + train + " --validation " +
                              validation + " --tokenizer data:" + (*dir_ / "data").string() + " --out " +
                              out.string() + " " + extra);
    EXPECT_EQ(result.status, 0) << result.output;
    return out.string();
  }

  static std::string classification_data() {
    write_classification_file(*dir_ / "train.jsonl", 96, 1);
    write_classification_file(*dir_ / "dev.jsonl", 48, 2);
    return prepare("classify", "classify-data", (*dir_ / "train.jsonl").string(), (*dir_ / "dev.jsonl").string(),
                   "--max-seq-length 24");
  }

  static std::string squad_data() {
    write_squad_file(*dir_ / "squad-train.json", 40, 3);
    write_squad_file(*dir_ / "squad-dev.json", 8, 4);
    return prepare("squad", "squad-data", (*dir_ / "squad-train.json").string(), (*dir_ / "squad-dev.json").string(),
                   "--max-seq-length 32 --doc-stride 8 --max-query-length 8");
  }

  /// A fine-tuning job of `steps` windows (global batch 12, dropout 0.1 in the encoder, the
  /// head's HF default), the model taken from the pretrained checkpoint; `changes` merged last.
  static std::string task_config(const std::string& name, const std::string& type, const std::string& data,
                                 int64_t steps, const json& changes = json::object()) {
    auto c = json::parse(io_text(write_config(steps)));
    c.erase("model");
    c["task"] = {{"type", type}, {"pretrained", pretrain()}};
    c["data"]["dir"] = data;
    c["optimizer"]["params"]["lr"] = 1e-3;
    c["checkpoint"]["every_windows"] = 4;
    c.merge_patch(changes);
    const auto path = *dir_ / (name + ".json");
    testing::write_text(path, c.dump(2));
    return path.string();
  }

  static json command_json(const std::string& command) {
    auto result = run_command(troupe_binary() + " " + command + " --json");
    EXPECT_EQ(result.status, 0) << command << "\n" << result.output;
    const auto at = result.output.find('{');
    return at == std::string::npos ? json::object() : json::parse(result.output.substr(at));
  }

  /// `troupe eval --predictions` of a classifier: run_glue.py's "index<TAB>prediction" lines, one
  /// per example of `gold_file` in its order, right as often as the reported accuracy says.
  static void expect_predictions_score(const std::filesystem::path& predictions, const std::filesystem::path& gold_file,
                                       double accuracy) {
    std::ifstream written(predictions), gold(gold_file);
    std::string line, expected;
    ASSERT_TRUE(std::getline(written, line)) << predictions;
    EXPECT_EQ(line, "index\tprediction");
    int64_t index = 0, right = 0;
    for (; std::getline(written, line) && std::getline(gold, expected); ++index) {
      const auto tab = line.find('\t');
      ASSERT_NE(tab, std::string::npos) << line;
      EXPECT_EQ(line.substr(0, tab), std::to_string(index));
      right += line.substr(tab + 1) == json::parse(expected)["label"].get<std::string>();
    }
    EXPECT_EQ(index, 48);
    EXPECT_FALSE(std::getline(written, line)) << "more predictions than examples: " << line;
    EXPECT_DOUBLE_EQ(static_cast<double>(right) / static_cast<double>(index), accuracy);
  }

  static void expect_same_bits(const std::vector<window_line>& a, const std::vector<window_line>& b,
                               const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].loss, b[i].loss) << what << ": window " << i + 1;
      EXPECT_EQ(a[i].parameter_hash, b[i].parameter_hash) << what << ": window " << i + 1;
    }
  }
};

TEST_F(fine_tuning_e2e, classification_learns_across_nodes_resumes_exactly_scores_and_round_trips_to_hf) {
  const auto data = classification_data();
  // The held-out task loss and accuracy every 8 steps, checked against `troupe eval` below.
  // lr 3e-3: at 1e-3 whether the encoder (pretrained for 12 windows) turns the adjective into the
  // label within 32 windows depended on the sample order's luck (one order: by window 27, another
  // not at all); at 3e-3 three orders learned it by windows 17, 23 and 29.
  const auto config = task_config("classify", "sequence_classification", data, 32,
                                  {{"eval_every_windows", 8}, {"optimizer", {{"params", {{"lr", 3e-3}}}}}});
  auto single = train(config, "classify-single");
  ASSERT_EQ(single.status, 0) << single.output;
  EXPECT_NE(single.output.find("fine-tuning sequence_classification from " + pretrain()), std::string::npos)
      << single.output;
  const auto reference = read_metrics("classify-single");
  ASSERT_EQ(reference.size(), 32u);
  std::ifstream lines(*dir_ / "classify-single" / "metrics.jsonl");
  std::string line;
  double first_accuracy = -1, last_accuracy = 0;
  while (std::getline(lines, line)) {
    const auto window = json::parse(line);
    ASSERT_TRUE(window.contains("task")) << line;
    EXPECT_EQ(window["masked_tokens"], 0);
    last_accuracy = window["task"]["accuracy"].get<double>();
    if (first_accuracy < 0) first_accuracy = last_accuracy;
  }
  EXPECT_LT(reference.back().loss, reference.front().loss) << "the classification loss did not fall";

  const auto manifest = write_manifest(2, "classify-two.json");
  auto two = launch(manifest, config, "classify-two");
  ASSERT_EQ(two.status, 0) << two.output;
  expect_same_curve(reference, read_metrics("classify-two"), "classification: 2 nodes vs 1 process");
  auto part = launch(manifest, config, "classify-resumed", "--max-windows 6");
  ASSERT_EQ(part.status, 0) << part.output;
  auto rest = launch(manifest, config, "classify-resumed", "--resume latest");
  ASSERT_EQ(rest.status, 0) << rest.output;
  expect_same_bits(read_metrics("classify-two"), read_metrics("classify-resumed"), "classification resumed");

  const auto predictions = *dir_ / "classify-predictions.tsv";
  const auto scores =
      command_json("eval --checkpoint " + (*dir_ / "classify-two").string() + " --predictions " + predictions.string());
  expect_predictions_score(predictions, *dir_ / "dev.jsonl", scores["accuracy"].get<double>());
  EXPECT_EQ(scores["task"], "classify");
  EXPECT_EQ(scores["examples"], 48);
  EXPECT_EQ(scores["labels"], json::array({"bad", "good"}));
  EXPECT_GT(scores["accuracy"].get<double>(), 0.75) << scores.dump() << " (the adjective decides the label)";
  EXPECT_EQ(scores["f1_of"], "good");
  // The job's last periodic evaluation scored the same 48 examples with the same parameters.
  std::ifstream evaluated(*dir_ / "classify-two" / "metrics.jsonl");
  std::vector<int64_t> evaluated_steps;
  json last_evaluation;
  for (std::string text; std::getline(evaluated, text);)
    if (const auto window = json::parse(text); window.contains("eval_accuracy")) {
      evaluated_steps.push_back(window["step"].get<int64_t>());
      last_evaluation = window;
    }
  EXPECT_EQ(evaluated_steps, (std::vector<int64_t>{8, 16, 24, 32}));
  EXPECT_EQ(last_evaluation["eval_examples"], 48);
  EXPECT_EQ(last_evaluation["eval_accuracy"], scores["accuracy"]) << last_evaluation.dump();
  EXPECT_NEAR(last_evaluation["eval_loss"].get<double>(), scores["loss"].get<double>(),
              1e-5 * scores["loss"].get<double>());
  std::printf("held-out accuracy %.3f, F1 %.3f after 32 windows (training accuracy %.3f → %.3f)\n",
              scores["accuracy"].get<double>(), scores["f1"].get<double>(), first_accuracy, last_accuracy);
  const auto label = command_json("predict --task classify --checkpoint " + (*dir_ / "classify-two").string() +
                                  " 'the brave whale sees the ship in the sea .'");
  ASSERT_EQ(label["labels"].size(), 2u);
  EXPECT_NEAR(label["labels"][0]["score"].get<double>() + label["labels"][1]["score"].get<double>(), 1.0, 1e-6);
  // --json also gives what HF's model returns: the ids it read and its logits, in label order,
  // whose softmax is the scores.
  ASSERT_EQ(label["logits"].size(), 2u) << label.dump();
  ASSERT_GT(label["input_ids"].size(), 2u);
  EXPECT_EQ(label["input_ids"].size(), label["token_type_ids"].size());
  const double good = 1.0 / (1.0 + std::exp(label["logits"][0].get<double>() - label["logits"][1].get<double>()));
  for (const auto& entry : label["labels"])
    EXPECT_NEAR(entry["score"].get<double>(), entry["label"] == "good" ? good : 1.0 - good, 1e-5) << label.dump();
  auto fill = run_command(troupe_binary() + " fill-mask --checkpoint " + (*dir_ / "classify-two").string() +
                          " 'the [MASK] .'");
  EXPECT_NE(fill.status, 0);
  EXPECT_NE(fill.output.find("has no masked-LM head"), std::string::npos) << fill.output;

  const auto hf = *dir_ / "classify-hf";
  auto exported = run_command(troupe_binary() + " ckpt export " + (*dir_ / "classify-two").string() + " --to " +
                              hf.string());
  ASSERT_EQ(exported.status, 0) << exported.output;
  const auto hf_config = json::parse(io_text((hf / "config.json").string()));
  EXPECT_EQ(hf_config["architectures"][0], "BertForSequenceClassification");
  EXPECT_EQ(hf_config["id2label"], (json{{"0", "bad"}, {"1", "good"}}));
  EXPECT_EQ(hf_config["label2id"], (json{{"bad", 0}, {"good", 1}}));
  const auto weights = io_text((hf / "model.safetensors").string());
  for (const char* name : {"bert.pooler.dense.weight", "classifier.weight", "classifier.bias",
                           "bert.encoder.layer.1.output.LayerNorm.bias"})
    EXPECT_NE(weights.find(std::string("\"") + name + "\""), std::string::npos) << name;
  EXPECT_EQ(weights.find("cls.predictions"), std::string::npos) << "the MLM head is not part of the task model";
  auto imported = run_command(troupe_binary() + " ckpt import " + hf.string() + " --to " + (*dir_ / "classify-back").string());
  ASSERT_EQ(imported.status, 0) << imported.output;
  const auto again = command_json("eval --checkpoint " + (*dir_ / "classify-back").string() + " --data " + data);
  EXPECT_EQ(again["accuracy"], scores["accuracy"]);
  EXPECT_EQ(again["loss"], scores["loss"]);
}

TEST_F(fine_tuning_e2e, question_answering_learns_across_nodes_and_is_scored_with_the_official_rules) {
  const auto data = squad_data();
  write_squad_file(*dir_ / "squad-dev-v2.json", 6, 5, /*impossible=*/true);
  const auto config = task_config("squad", "question_answering", data, 12);
  auto single = train(config, "squad-single");
  ASSERT_EQ(single.status, 0) << single.output;
  const auto reference = read_metrics("squad-single");
  ASSERT_EQ(reference.size(), 12u);
  EXPECT_LT(reference.back().loss, reference.front().loss) << "the span loss did not fall";
  auto two = launch(write_manifest(2, "squad-two.json"), config, "squad-two");
  ASSERT_EQ(two.status, 0) << two.output;
  expect_same_curve(reference, read_metrics("squad-two"), "question answering: 2 nodes vs 1 process");

  const auto predictions = *dir_ / "squad-predictions.json";
  const auto scores = command_json("eval --task squad --checkpoint " + (*dir_ / "squad-two").string() + " --input " +
                                   (*dir_ / "squad-dev.json").string() + " --predictions " + predictions.string());
  EXPECT_EQ(scores["version"], "1.1");
  EXPECT_EQ(scores["questions"], 24);
  EXPECT_EQ(scores["total"], 24);
  for (const char* key : {"exact_match", "f1"}) {
    EXPECT_GE(scores[key].get<double>(), 0.0) << key;
    EXPECT_LE(scores[key].get<double>(), 100.0) << key;
  }
  EXPECT_GE(scores["f1"].get<double>(), scores["exact_match"].get<double>());
  std::printf("toy SQuAD v1.1 dev: exact match %.1f, F1 %.1f after 12 windows\n", scores["exact_match"].get<double>(),
              scores["f1"].get<double>());
  const auto written = json::parse(io_text(predictions.string()));
  EXPECT_EQ(written.size(), 24u);
  EXPECT_TRUE(written.contains("q0-0") && written["q0-0"].is_string()) << written.dump();
  const auto v2_predictions = *dir_ / "squad-v2-predictions.json", null_odds = *dir_ / "squad-v2-null-odds.json";
  const auto v2 = command_json("eval --checkpoint " + (*dir_ / "squad-two").string() + " --input " +
                               (*dir_ / "squad-dev-v2.json").string() + " --predictions " + v2_predictions.string() +
                               " --null-odds " + null_odds.string());
  EXPECT_EQ(v2["version"], "2.0");
  EXPECT_EQ(v2["HasAns"]["total"], 12);
  EXPECT_EQ(v2["NoAns"]["total"], 6);
  // The best threshold is one of those tried, the script's own at 1.0 among them.
  EXPECT_GE(v2["best_f1"].get<double>(), v2["f1"].get<double>() - 1e-9) << v2.dump();
  EXPECT_GE(v2["best_exact"].get<double>(), v2["exact_match"].get<double>() - 1e-9) << v2.dump();
  const auto odds = json::parse(io_text(null_odds.string())), answered = json::parse(io_text(v2_predictions.string()));
  ASSERT_EQ(odds.size(), 18u);
  for (const auto& [id, diff] : odds.items())  // --null-score-diff-threshold 0: "" exactly when the null score wins
    EXPECT_EQ(answered[id].get<std::string>().empty(), diff.get<double>() > 0.0) << id;
  const auto v1_odds = run_command(troupe_binary() + " eval --checkpoint " + (*dir_ / "squad-two").string() +
                                   " --input " + (*dir_ / "squad-dev.json").string() + " --null-odds " +
                                   (*dir_ / "v1-odds.json").string());
  EXPECT_NE(v1_odds.status, 0);
  EXPECT_NE(v1_odds.output.find("--null-odds"), std::string::npos) << v1_odds.output;
  EXPECT_FALSE(std::filesystem::exists(*dir_ / "v1-odds.json"));
  const auto answer = command_json("predict --task squad --checkpoint " + (*dir_ / "squad-two").string() +
                                   " --question 'who finds the whale ?' --context 'the old king finds the whale in the "
                                   "sea . the brave bird sees the city in the sea .'");
  EXPECT_TRUE(answer["answer"].is_string());
  EXPECT_GT(answer["score"].get<double>(), 0.0);
  ASSERT_EQ(answer["windows"].size(), 1u) << answer.dump();  // a short context: one window
  const auto& window = answer["windows"][0];
  EXPECT_GT(window["input_ids"].size(), 10u);
  EXPECT_EQ(window["start_logits"].size(), window["input_ids"].size());
  EXPECT_EQ(window["end_logits"].size(), window["input_ids"].size());
  EXPECT_EQ(window["token_type_ids"].size(), window["input_ids"].size());

  const auto hf = *dir_ / "squad-hf";
  auto exported = run_command(troupe_binary() + " ckpt export " + (*dir_ / "squad-two").string() + " --to " + hf.string());
  ASSERT_EQ(exported.status, 0) << exported.output;
  EXPECT_EQ(json::parse(io_text((hf / "config.json").string()))["architectures"][0], "BertForQuestionAnswering");
  const auto weights = io_text((hf / "model.safetensors").string());
  EXPECT_NE(weights.find("\"qa_outputs.weight\""), std::string::npos);
  EXPECT_EQ(weights.find("pooler"), std::string::npos) << "BertForQuestionAnswering has no pooler";
}

// DistilBERT and ALBERT through the same path: each pretrained 12 windows, then fine-tuned (one
// for classification, one for question answering), scored, exported as its HF task class (that
// class's head, no pooler in either) and imported back to the same scores.
TEST_F(fine_tuning_e2e, distilbert_and_albert_fine_tune_and_export_as_their_hf_task_classes) {
  struct model_case {
    std::string model, task, data, hf_class, head;
  };
  const std::vector<model_case> cases = {
      {"distilbert", "sequence_classification", classification_data(), "DistilBertForSequenceClassification",
       "pre_classifier.weight"},
      {"albert", "question_answering", squad_data(), "AlbertForQuestionAnswering", "qa_outputs.weight"}};
  for (const auto& c : cases) {
    const auto name = c.model + "-task";
    const auto config = task_config(name, c.task, c.data, 16, {{"task", {{"pretrained", pretrain(c.model)}}}});
    auto run = train(config, name);
    ASSERT_EQ(run.status, 0) << name << "\n" << run.output;
    EXPECT_NE(run.output.find("(" + c.model + " model)"), std::string::npos) << run.output;
    const auto windows = read_metrics(name);
    ASSERT_EQ(windows.size(), 16u) << name;
    double first = 0, last = 0;
    for (std::size_t i = 0; i < 4; ++i) first += windows[i].loss, last += windows[windows.size() - 1 - i].loss;
    EXPECT_LT(last, first) << name << ": the task loss did not fall over 16 windows";

    const auto squad = c.task == "question_answering" ? " --input " + (*dir_ / "squad-dev.json").string() : "";
    const auto scores = command_json("eval --checkpoint " + (*dir_ / name).string() + squad);
    const auto hf = *dir_ / (name + "-hf");
    auto exported = run_command(troupe_binary() + " ckpt export " + (*dir_ / name).string() + " --to " + hf.string());
    ASSERT_EQ(exported.status, 0) << exported.output;
    EXPECT_EQ(json::parse(io_text((hf / "config.json").string()))["architectures"][0], c.hf_class);
    const auto weights = io_text((hf / "model.safetensors").string());
    EXPECT_NE(weights.find("\"" + c.head + "\""), std::string::npos) << name;
    EXPECT_EQ(weights.find("pooler"), std::string::npos) << c.hf_class << " has no pooler";
    for (const char* mlm_head : {"predictions.", "vocab_projector"})  // ALBERT's, DistilBERT's
      EXPECT_EQ(weights.find(mlm_head), std::string::npos) << "the MLM head is not part of " << c.hf_class;
    auto imported = run_command(troupe_binary() + " ckpt import " + hf.string() + " --to " +
                                (*dir_ / (name + "-back")).string());
    ASSERT_EQ(imported.status, 0) << imported.output;
    const auto again = command_json("eval --checkpoint " + (*dir_ / (name + "-back")).string() + " --data " + c.data + squad);
    for (const char* key : {"accuracy", "loss", "exact_match", "f1"})
      if (scores.contains(key)) EXPECT_EQ(again[key], scores[key]) << name << ": " << key;
  }
}

// task.rescale_embeddings through `troupe train`: the first window's loss (before any step) is
// the plain fine-tune's, since the embeddings' LayerNorm divides the factor out, while the
// parameters the window started from are not the pretrained ones.
TEST_F(fine_tuning_e2e, rescaled_pretrained_embeddings_start_from_the_same_function) {
  const auto data = classification_data();
  auto plain = train(task_config("rescale-off", "sequence_classification", data, 1), "rescale-off");
  ASSERT_EQ(plain.status, 0) << plain.output;
  auto rescaled = train(task_config("rescale-on", "sequence_classification", data, 1,
                                    {{"task", {{"rescale_embeddings", true}}}}),
                        "rescale-on");
  ASSERT_EQ(rescaled.status, 0) << rescaled.output;
  const auto off = read_metrics("rescale-off"), on = read_metrics("rescale-on");
  ASSERT_EQ(off.size(), 1u);
  ASSERT_EQ(on.size(), 1u);
  EXPECT_NEAR(on[0].loss, off[0].loss, 1e-5 * off[0].loss);
  EXPECT_NE(on[0].parameter_hash, off[0].parameter_hash);
}

// task.frozen_encoder_steps through `troupe train`: after two held windows of two the encoder's
// embeddings and layers are the pretrained checkpoint's to the bit (`troupe ckpt diff`); with one
// held window of two they have moved. (That the head learns meanwhile is the unit tests' part:
// the pretrained checkpoint has no head to compare with.)
TEST_F(fine_tuning_e2e, a_frozen_encoder_stays_the_pretrained_one_while_held) {
  const auto data = classification_data();
  const auto encoder_difference = [&](const std::string& run) {
    const auto out = run_command(troupe_binary() + " ckpt diff " + (*dir_ / run).string() + " " + pretrain());
    EXPECT_EQ(out.status, 0) << out.output;
    double largest = 0;
    int compared = 0;
    std::istringstream lines(out.output);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty() || line[0] != '{') continue;
      const auto d = json::parse(line);
      const std::string name = d["tensor"];
      if (d["section"] != "model" || d["max_abs_diff"].is_null() || name.rfind("bert.pooler.", 0) == 0) continue;
      largest = std::max(largest, d["max_abs_diff"].get<double>());
      ++compared;
    }
    EXPECT_GE(compared, 20) << run << ": the embeddings' and two layers' tensors are in both\n" << out.output;
    return largest;
  };
  for (const int held : {2, 1}) {
    const auto name = "frozen-" + std::to_string(held);
    auto run = train(task_config(name, "sequence_classification", data, 2,
                                 {{"task", {{"frozen_encoder_steps", held}}}, {"checkpoint", {{"every_windows", 2}}}}),
                     name);
    ASSERT_EQ(run.status, 0) << run.output;
    const double moved = encoder_difference(name);
    if (held == 2) EXPECT_EQ(moved, 0.0) << name << ": the encoder moved while held";
    else EXPECT_GT(moved, 0.0) << name << ": the encoder did not learn after the held window";
  }
}

// configs/polarity-finetune.json and configs/squad-finetune.json as a user copies them, pointed at
// the toy pretrained run and task data, for two windows with everything else as written.
TEST_F(fine_tuning_e2e, the_ready_fine_tuning_configs_train) {
  for (const auto& [name, data] : {std::pair{std::string("polarity-finetune"), classification_data()},
                                   std::pair{std::string("squad-finetune"), squad_data()}}) {
    auto c = json::parse(io_text(std::string(TROUPE_SOURCE_DIR) + "/configs/" + name + ".json"));
    EXPECT_FALSE(c.contains("model")) << name << ": the model is the pretrained run's";
    c["task"]["pretrained"] = pretrain();
    c["data"]["dir"] = data;
    c["train_steps"] = 2;
    c["checkpoint"]["every_windows"] = 2;
    c["scheduler"]["params"]["warmup_num_steps"] = 1;
    c["runtime"]["threads"] = 1;
    c["steps_per_print"] = 1;
    const auto path = *dir_ / (name + "-config.json");
    testing::write_text(path, c.dump(2));
    auto run = train(path.string(), name);
    ASSERT_EQ(run.status, 0) << name << "\n" << run.output;
    const auto windows = read_metrics(name);
    ASSERT_EQ(windows.size(), 2u) << name;
    for (const auto& w : windows) EXPECT_TRUE(std::isfinite(w.loss) && w.loss > 0) << name << ": " << w.loss;
    EXPECT_NE(run.output.find("acc "), std::string::npos) << "the progress line shows the task's accuracy\n"
                                                          << run.output;
  }
}

TEST_F(fine_tuning_e2e, bad_task_jobs_are_refused_before_any_work_naming_the_field) {
  const auto data = classification_data();
  auto refused = [&](const std::string& name, const std::string& config, const std::string& expected) {
    auto result = train(config, name);
    EXPECT_NE(result.status, 0) << name;
    EXPECT_NE(result.output.find(expected), std::string::npos) << name << "\n" << result.output;
    EXPECT_FALSE(std::filesystem::exists(*dir_ / name / "metrics.jsonl")) << name << ": work started";
  };
  refused("wrong-task", task_config("wrong-task", "question_answering", data, 2),
          "task.type: \"question_answering\" trains on `troupe prepare --task squad` examples");
  refused("no-pretrained", task_config("no-pretrained", "sequence_classification", data, 2,
                                       {{"task", {{"pretrained", (*dir_ / "nowhere").string()}}}}),
          "task.pretrained: ");
  refused("wider", task_config("wider", "sequence_classification", data, 2,
                               {{"model", {{"hidden_size", 96}, {"num_attention_heads", 2}}}}),
          "model.hidden_size: 96 differs from task.pretrained's 64");
  refused("no-type", task_config("no-type", "sequence_classification", data, 2, {{"task", {{"type", nullptr}}}}),
          "task.type: ");
  auto pretraining = json::parse(io_text(write_config(2)));
  pretraining["data"]["dir"] = data;
  testing::write_text(*dir_ / "pretrain-on-task-data.json", pretraining.dump());
  refused("pretrain-on-task-data", (*dir_ / "pretrain-on-task-data.json").string(),
          "holds classify fine-tuning examples");
}

}  // namespace
}  // namespace troupe
