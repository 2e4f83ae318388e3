#include "tools/commands/task_evaluation.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "compute/classification_scores.hpp"
#include "compute/task_inference.hpp"
#include "io/data/data_tokenizer.hpp"
#include "io/data/mlm_batch_builder.hpp"
#include "io/data/squad_evaluation.hpp"
#include "io/data/squad_features.hpp"
#include "io/os/file_util.hpp"
#include "messages/error.hpp"

namespace troupe::tools {
namespace {

using nlohmann::json;

compute::task_inference open_model(const io::checkpoint_contents& checkpoint, const task_eval_settings& settings) {
  return compute::task_inference(checkpoint.model, *checkpoint.task, checkpoint.parameters,
                                 c10::Device(settings.device), settings.bf16);
}

json evaluate_classification(const io::checkpoint_contents& checkpoint, const task_eval_settings& settings) {
  io::token_dataset validation(settings.data_dir, "validation");
  const auto& labels = checkpoint.task->labels;
  if (validation.manifest().labels != labels)
    throw make_error(settings.data_dir.string(), ": its labels differ from the checkpoint's (", checkpoint.dir.string(),
                     "); evaluate on data prepared with the training file's label set");
  auto model = open_model(checkpoint, settings);
  io::mlm_batch_builder builder(validation, 0.15, 0);
  compute::classification_scores scores(static_cast<int64_t>(labels.size()));
  const bool write_predictions = !settings.predictions.empty();
  std::string predictions = "index\tprediction\n";  // run_glue.py's predict_results file
  double loss_sum = 0;
  const uint64_t examples = settings.max_samples > 0 ? std::min<uint64_t>(settings.max_samples, validation.size())
                                                     : validation.size();
  for (uint64_t start = 0; start < examples; start += static_cast<uint64_t>(settings.batch_size)) {
    std::vector<compute::sample_ref> refs;
    for (uint64_t i = start; i < std::min<uint64_t>(examples, start + settings.batch_size); ++i) refs.push_back({0, i});
    const auto batch = builder.build(refs);
    const auto logits = model.logits(batch.input_ids, batch.token_type_ids, batch.lengths);
    const auto gold = batch.task_labels.select(1, 0).contiguous();
    loss_sum += at::cross_entropy_loss(logits, gold, {}, at::Reduction::Sum).item<double>();
    const auto predicted = logits.argmax(-1).contiguous();
    const int64_t *guess = predicted.data_ptr<int64_t>(), *truth = gold.data_ptr<int64_t>();
    for (int64_t i = 0; i < gold.size(0); ++i) {
      scores.add(guess[i], truth[i]);
      if (write_predictions)
        predictions += std::to_string(start + static_cast<uint64_t>(i)) + "\t" +
                       labels.at(static_cast<std::size_t>(guess[i])) + "\n";
    }
  }
  if (write_predictions) io::write_file_atomically(settings.predictions, predictions);
  json result = {{"task", "classify"},
          {"examples", scores.examples()},
          {"labels", labels},
          {"accuracy", scores.accuracy()},
          {"f1", scores.reported_f1()},
          {"f1_of", labels.size() == 2 ? labels[1] : "macro"},
          {"macro_f1", scores.macro_f1()},
          {"loss", scores.examples() > 0 ? loss_sum / static_cast<double>(scores.examples()) : 0.0},
          {"confusion", scores.confusion()}};
  if (write_predictions) result["predictions"] = settings.predictions.string();
  return result;
}

/// Every window's start and end logits at max_seq_length (padded as run_squad.py pads).
std::vector<io::squad_window_logits> window_logits(compute::task_inference& model,
                                                   const std::vector<io::squad_feature>& features, int64_t seq,
                                                   int32_t pad, int64_t batch_size) {
  std::vector<io::squad_window_logits> out;
  for (std::size_t start = 0; start < features.size(); start += static_cast<std::size_t>(batch_size)) {
    const auto count = static_cast<int64_t>(std::min(features.size() - start, static_cast<std::size_t>(batch_size)));
    auto ids = at::full({count, seq}, pad, at::kLong), types = at::zeros({count, seq}, at::kLong);
    auto lengths = at::empty({count}, at::kLong);
    int64_t *id = ids.data_ptr<int64_t>(), *type = types.data_ptr<int64_t>(), *length = lengths.data_ptr<int64_t>();
    for (int64_t b = 0; b < count; ++b) {
      const auto& feature = features[start + static_cast<std::size_t>(b)];
      std::copy(feature.input_ids.begin(), feature.input_ids.end(), id + b * seq);
      std::copy(feature.token_types.begin(), feature.token_types.end(), type + b * seq);
      length[b] = static_cast<int64_t>(feature.input_ids.size());
    }
    const auto logits = model.logits(ids, types, lengths).contiguous();
    for (int64_t b = 0; b < count; ++b) {
      const float* row = logits[b].data_ptr<float>();
      io::squad_window_logits window;
      for (int64_t p = 0; p < seq; ++p) {
        window.start.push_back(row[2 * p]);
        window.end.push_back(row[2 * p + 1]);
      }
      out.push_back(std::move(window));
    }
  }
  return out;
}

json subset_json(const io::squad_subset_score& subset) {
  return {{"exact", subset.exact}, {"f1", subset.f1}, {"total", subset.total}};
}

json evaluate_squad_file(const io::checkpoint_contents& checkpoint, const task_eval_settings& settings) {
  if (settings.squad_file.empty())
    throw make_error("--input: the SQuAD file to answer (e.g. dev-v1.1.json) is required for --task squad");
  const auto manifest = squad_manifest(settings.data_dir);
  const auto questions = io::read_squad_file(settings.squad_file);
  if (!settings.null_odds.empty() && questions.version != io::squad_version::v2_0)
    throw make_error("--null-odds: ", settings.squad_file.string(),
                     " is a SQuAD v1.1 file; null odds (no-answer scores) are for v2.0 files");
  const auto tokens = io::open_data_tokenizer(manifest, settings.data_dir);
  auto model = open_model(checkpoint, settings);
  const auto answers = answer_squad(model, questions, *tokens, manifest, settings.answers, settings.batch_size);
  const bool v2 = questions.version == io::squad_version::v2_0;
  std::map<std::string, std::string> predictions;
  std::map<std::string, double> null_odds;  // run_squad.py's null_odds.json: v2.0's --na-prob-file
  for (std::size_t q = 0; q < answers.size(); ++q) {
    predictions[questions.questions[q].id] = answers[q].text;
    if (v2) null_odds[questions.questions[q].id] = answers[q].null_score_diff;
  }
  if (!settings.predictions.empty())
    io::write_file_atomically(settings.predictions, json(predictions).dump(2) + "\n");
  if (!settings.null_odds.empty()) io::write_file_atomically(settings.null_odds, json(null_odds).dump(2) + "\n");
  const auto score = io::evaluate_squad(questions, predictions, null_odds);
  json result = {{"task", "squad"},
                 {"file", settings.squad_file.string()},
                 {"version", questions.version == io::squad_version::v2_0 ? "2.0" : "1.1"},
                 {"questions", questions.questions.size()},
                 {"exact_match", score.all.exact},
                 {"f1", score.all.f1},
                 {"total", score.all.total}};
  if (score.has_answer) result["HasAns"] = subset_json(*score.has_answer);
  if (score.no_answer) result["NoAns"] = subset_json(*score.no_answer);
  if (score.best) {  // the script's own key names
    result["best_exact"] = score.best->exact;
    result["best_exact_thresh"] = score.best->exact_threshold;
    result["best_f1"] = score.best->f1;
    result["best_f1_thresh"] = score.best->f1_threshold;
  }
  if (!settings.predictions.empty()) result["predictions"] = settings.predictions.string();
  if (!settings.null_odds.empty()) result["null_odds"] = settings.null_odds.string();
  return result;
}

}  // namespace

io::dataset_manifest squad_manifest(const std::filesystem::path& data_dir) {
  auto manifest = io::dataset_manifest::from_file(data_dir / "manifest.json");
  if (manifest.fine_tuning_task != "squad")
    throw make_error(data_dir.string(), ": holds ", manifest.task_name(),
                     " data; a question-answering model reads its tokenizer and window sizes from `troupe prepare "
                     "--task squad` data (--data)");
  return manifest;
}

std::vector<io::squad_answer_prediction> answer_squad(compute::task_inference& model, const io::squad_dataset& questions,
                                                      const io::tokenizer& tokens, const io::dataset_manifest& manifest,
                                                      io::squad_prediction_settings answers, int64_t batch_size,
                                                      squad_windows* windows) {
  const io::squad_feature_settings cut{manifest.max_seq_length, manifest.doc_stride > 0 ? manifest.doc_stride : 128,
                                       manifest.max_query_length > 0 ? manifest.max_query_length : 64};
  const auto features = io::make_squad_features(questions, tokens, cut, /*training=*/false);
  const auto logits = window_logits(model, features, cut.max_seq_length, manifest.specials.pad, batch_size);
  answers.version_2_with_negative = questions.version == io::squad_version::v2_0;
  answers.lower_case = manifest.lower_case;
  const io::piece_text text{tokens.kind(), tokens.pieces()};
  std::vector<io::squad_answer_prediction> out;
  for (std::size_t first = 0; first < features.size();) {
    std::vector<const io::squad_feature*> windows;
    std::vector<const io::squad_window_logits*> window_scores;
    std::size_t end = first;
    for (; end < features.size() && features[end].question == features[first].question; ++end) {
      windows.push_back(&features[end]);
      window_scores.push_back(&logits[end]);
    }
    TROUPE_ENFORCE(features[first].question == out.size(), "question ", out.size(), " has no window");
    out.push_back(io::predict_squad_answer(questions.questions[features[first].question], windows, window_scores, text,
                                           answers));
    first = end;
  }
  TROUPE_ENFORCE(out.size() == questions.questions.size(), "a question without windows");
  if (windows) *windows = {features, logits};
  return out;
}

json evaluate_task(const io::checkpoint_contents& checkpoint, const task_eval_settings& settings) {
  TROUPE_ENFORCE(checkpoint.task.has_value(), "evaluate_task of a checkpoint without a task head");
  auto result = checkpoint.task->type == compute::task_type::question_answering
                    ? evaluate_squad_file(checkpoint, settings)
                    : evaluate_classification(checkpoint, settings);
  result["checkpoint"] = checkpoint.dir.string();
  result["step"] = checkpoint.state.optimizer_steps;
  result["data"] = settings.data_dir.string();
  return result;
}

void print_task_evaluation(const json& result) {
  std::printf("checkpoint          %s (step %lld)\n", result["checkpoint"].get<std::string>().c_str(),
              static_cast<long long>(result["step"].get<int64_t>()));
  if (result["task"] == "classify") {
    std::printf("held-out            %lld validation examples of %s\n",
                static_cast<long long>(result["examples"].get<int64_t>()), result["data"].get<std::string>().c_str());
    std::printf("accuracy            %.2f%%\n", 100 * result["accuracy"].get<double>());
    std::printf("F1                  %.2f%% (%s), macro F1 %.2f%%\n", 100 * result["f1"].get<double>(),
                result["f1_of"].get<std::string>().c_str(), 100 * result["macro_f1"].get<double>());
    std::printf("loss                %.4f (mean cross-entropy)\n", result["loss"].get<double>());
    if (result.contains("predictions"))
      std::printf("predictions         %s\n", result["predictions"].get<std::string>().c_str());
    return;
  }
  std::printf("questions           %lld of %s (SQuAD v%s)\n", static_cast<long long>(result["questions"].get<int64_t>()),
              result["file"].get<std::string>().c_str(), result["version"].get<std::string>().c_str());
  std::printf("exact match         %.2f\nF1                  %.2f\n", result["exact_match"].get<double>(),
              result["f1"].get<double>());
  for (const char* subset : {"HasAns", "NoAns"})
    if (result.contains(subset))
      std::printf("%-19s exact %.2f, F1 %.2f over %lld questions\n", subset, result[subset]["exact"].get<double>(),
                  result[subset]["f1"].get<double>(), static_cast<long long>(result[subset]["total"].get<int64_t>()));
  if (result.contains("best_f1"))
    std::printf("best threshold      exact %.2f at %.4f, F1 %.2f at %.4f (null score − best span; "
                "--null-score-diff-threshold)\n",
                result["best_exact"].get<double>(), result["best_exact_thresh"].get<double>(),
                result["best_f1"].get<double>(), result["best_f1_thresh"].get<double>());
  for (const char* file : {"predictions", "null_odds"})
    if (result.contains(file)) std::printf("%-19s %s\n", file, result[file].get<std::string>().c_str());
}

}  // namespace troupe::tools
