// `troupe predict`: what a fine-tuned checkpoint says about the user's own text, as HF's
// question-answering and text-classification pipelines show it — fill-mask's counterpart for
// fine-tuned models:
//
//   --task squad     --question Q --context C   the best answer span, its probability (softmax
//                                                over the n-best spans, as the pipeline's score)
//                                                and where it starts and ends in the context
//   --task classify  TEXT [--pair TEXT]          the label and its probability (softmax over the
//                                                labels), then the others
//
// With --json the object also holds what HF's models return: the input ids and token types the
// model read, and its logits (classify: one per label; squad: start and end per position of
// each window).

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "compute/device_check.hpp"
#include "compute/task_inference.hpp"
#include "io/checkpoint/checkpoint_store.hpp"
#include "io/data/data_tokenizer.hpp"
#include "io/data/sentence_pair_encoding.hpp"
#include "io/data/token_dataset.hpp"
#include "messages/error.hpp"
#include "tools/commands/checkpoint_data.hpp"
#include "tools/commands/commands.hpp"
#include "tools/commands/task_evaluation.hpp"

namespace troupe::tools {
namespace {

using nlohmann::json;

struct predict_arguments {
  std::string task;
  std::string checkpoint;
  std::string data;
  std::string question, context;
  std::vector<std::string> texts;  ///< classify: the text, and optionally its pair
  std::string device = "cpu";
  io::squad_prediction_settings answers;
  bool json = false;
};

struct predict_session {
  io::checkpoint_contents checkpoint;
  std::filesystem::path data_dir;
  io::dataset_manifest manifest;
  std::unique_ptr<io::tokenizer> tokens;
  std::unique_ptr<compute::task_inference> model;
};

/// The checkpoint (a fine-tuned model of `args.task`), its data's tokenizer and the model.
predict_session open_session(const predict_arguments& args) {
  compute::check_device(args.device, "--device");
  predict_session s;
  const auto dir = io::resolve_checkpoint(args.checkpoint, args.checkpoint);
  s.checkpoint = io::load_checkpoint(dir, /*with_optimizer=*/false);
  const std::string wanted = args.task == "squad" ? "question_answering" : "sequence_classification";
  if (!s.checkpoint.task || compute::task_type_name(s.checkpoint.task->type) != wanted)
    throw make_error("--task ", args.task, ": ", dir.string(), " is ",
                     s.checkpoint.task ? "a fine-tuned " + compute::task_type_name(s.checkpoint.task->type) + " model"
                                       : "a pretrained model without a task head (fine-tune it with a `task` block)");
  s.data_dir = checkpoint_data_dir(args.data, s.checkpoint);
  s.manifest = args.task == "squad" ? squad_manifest(s.data_dir)
                                    : io::dataset_manifest::from_file(s.data_dir / "manifest.json");
  require_checkpoint_vocabulary(s.manifest, s.data_dir, s.checkpoint, dir);
  s.tokens = io::open_data_tokenizer(s.manifest, s.data_dir);
  s.model = std::make_unique<compute::task_inference>(s.checkpoint.model, *s.checkpoint.task, s.checkpoint.parameters,
                                                      c10::Device(args.device), false);
  return s;
}

json predict_answer(const predict_arguments& args, predict_session& s) {
  if (args.question.empty() || args.context.empty())
    throw make_error("--question and --context: both are needed with --task squad");
  io::squad_dataset one;
  one.questions.push_back({"question", args.question, args.context, {}, false});
  squad_windows windows;
  const auto answer = answer_squad(*s.model, one, *s.tokens, s.manifest, args.answers, 8, &windows).front();
  const auto& best = answer.n_best.front();
  json result = {{"answer", best.text}, {"score", best.probability}};
  // What the model read and said, window by window (a long context is cut with the data's
  // doc stride): HF's BertForQuestionAnswering gives the same start and end logits for these ids.
  result["windows"] = json::array();
  for (std::size_t w = 0; w < windows.features.size(); ++w) {
    const auto& feature = windows.features[w];
    const auto length = feature.input_ids.size();
    const auto& logits = windows.logits[w];
    result["windows"].push_back({{"input_ids", feature.input_ids},
                                 {"token_type_ids", std::vector<int>(feature.token_types.begin(), feature.token_types.end())},
                                 {"start_logits", std::vector<float>(logits.start.begin(), logits.start.begin() + length)},
                                 {"end_logits", std::vector<float>(logits.end.begin(), logits.end.begin() + length)}});
  }
  const auto at = args.context.find(best.text);
  if (!best.text.empty() && at != std::string::npos) {
    result["start"] = at;  // bytes into --context, as HF's pipeline gives characters
    result["end"] = at + best.text.size();
  }
  return result;
}

json predict_label(const predict_arguments& args, predict_session& s) {
  if (args.texts.empty() || args.texts.size() > 2)
    throw make_error("TEXT: one text (and optionally its pair) to classify, got ", args.texts.size());
  const auto pair = args.texts.size() == 2 ? std::optional(args.texts[1]) : std::nullopt;
  const auto encoded = io::encode_sentences(*s.tokens, args.texts[0], pair, s.manifest.max_seq_length);
  const auto length = static_cast<int64_t>(encoded.input_ids.size());
  auto ids = at::empty({1, length}, at::kLong), types = at::empty({1, length}, at::kLong);
  std::copy(encoded.input_ids.begin(), encoded.input_ids.end(), ids.data_ptr<int64_t>());
  std::copy(encoded.token_types.begin(), encoded.token_types.end(), types.data_ptr<int64_t>());
  const auto logits = s.model->logits(ids, types, {})[0].contiguous();
  const auto probabilities = logits.softmax(-1);
  const auto& labels = s.checkpoint.task->labels;
  json ranked = json::array();
  const auto order = probabilities.argsort(0, /*descending=*/true);
  for (int64_t rank = 0; rank < order.size(0); ++rank) {
    const auto index = order[rank].item<int64_t>();
    ranked.push_back({{"label", labels.at(static_cast<std::size_t>(index))}, {"score", probabilities[index].item<double>()}});
  }
  // The model's own outputs, as HF's BertForSequenceClassification returns them for these ids:
  // logits in the order of the checkpoint's labels (config.json's id2label).
  const std::vector<float> raw(logits.data_ptr<float>(), logits.data_ptr<float>() + logits.numel());
  return {{"label", ranked[0]["label"]},
          {"score", ranked[0]["score"]},
          {"labels", ranked},
          {"input_ids", encoded.input_ids},
          {"token_type_ids", std::vector<int>(encoded.token_types.begin(), encoded.token_types.end())},
          {"logits", raw}};
}

void print_prediction(const predict_arguments& args, const json& result) {
  if (args.task == "squad") {
    std::printf("answer  %s\nscore   %.4f\n", result["answer"].get<std::string>().c_str(), result["score"].get<double>());
    if (result.contains("start"))
      std::printf("span    bytes %llu … %llu of the context\n",
                  static_cast<unsigned long long>(result["start"].get<uint64_t>()),
                  static_cast<unsigned long long>(result["end"].get<uint64_t>()));
    return;
  }
  for (const auto& entry : result["labels"])
    std::printf("%-20s %.4f\n", entry["label"].get<std::string>().c_str(), entry["score"].get<double>());
}

}  // namespace

void add_predict_command(CLI::App& app) {
  auto args = std::make_shared<predict_arguments>();
  auto* command = app.add_subcommand("predict", "a fine-tuned model's answer (squad) or label (classify) for your text");
  command->add_option("--task", args->task, "squad or classify")->required()->check(CLI::IsMember({"squad", "classify"}));
  command->add_option("checkpoint,--checkpoint", args->checkpoint, "fine-tuned checkpoint directory or run directory")->required();
  command->add_option("--data", args->data, "the task's data directory (its tokenizer; default: the checkpoint's)");
  command->add_option("--question", args->question, "squad: the question");
  command->add_option("--context", args->context, "squad: the passage holding the answer");
  command->add_option("text", args->texts, "classify: the text, and optionally its pair");
  command->add_option("--max-answer-length", args->answers.max_answer_length, "squad: longest answer in pieces")
      ->capture_default_str();
  command->add_option("--device", args->device, "cpu or cuda:N")->capture_default_str();
  command->add_flag("--json", args->json, "print one JSON object");
  command->callback([args] {
    auto session = open_session(*args);
    const auto result = args->task == "squad" ? predict_answer(*args, session) : predict_label(*args, session);
    if (args->json) {
      std::printf("%s\n", result.dump().c_str());
      return;
    }
    print_prediction(*args, result);
  });
}

}  // namespace troupe::tools
