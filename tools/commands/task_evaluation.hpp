#pragma once
/// `troupe eval` of a fine-tuned checkpoint: the task's scores as the seeds report them.
///
///   classify  the data directory's validation split (`troupe prepare --task classify
///             --validation FILE`): accuracy, F1 (run_glue.py's: class 1's for two labels, else
///             macro), macro F1, the confusion counts and the mean cross-entropy; `--predictions`
///             writes each example's predicted label as run_glue.py's predict_results file
///             ("index<TAB>prediction" under that header, the examples in the split's order)
///   squad     the official dev file itself (`--input`), cut into windows as the training data was
///             (the data manifest's max_seq_length, doc_stride and max_query_length), each window
///             padded to max_seq_length as run_squad.py pads it; answers as
///             compute_predictions_logits finds them (io/data/squad_predictions.hpp), scored with
///             the official scripts' rules (io/data/squad_evaluation.hpp); `--predictions`
///             writes the official predictions file {id: answer}; for v2.0 the scores are
///             evaluate-v2.0.py's with --na-prob-file of the null odds (null score − best span
///             score, run_squad.py's null_odds.json, which `--null-odds` writes), best_exact and
///             best_f1 with their thresholds included

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "io/checkpoint/checkpoint_store.hpp"
#include "io/data/squad_predictions.hpp"
#include "io/data/token_dataset.hpp"

namespace troupe::compute {
class task_inference;
}

namespace troupe::tools {

struct task_eval_settings {
  std::filesystem::path data_dir;     ///< the prepared task data (its tokenizer, labels, window sizes)
  std::filesystem::path squad_file;   ///< squad: the questions to answer and score
  std::filesystem::path predictions;  ///< squad: {id: answer}; classify: index<TAB>label; empty: nowhere
  std::filesystem::path null_odds;    ///< squad v2.0: where to write {id: null score diff}; empty: nowhere
  std::string device = "cpu";
  bool bf16 = false;
  int64_t batch_size = 32;
  int64_t max_samples = 0;  ///< classify: the first N validation examples (0: all)
  io::squad_prediction_settings answers;
};

/// Scores `checkpoint` (which has a task head) and returns the result as `troupe eval --json`
/// prints it. Throws troupe::error naming the option or file that does not fit the checkpoint.
nlohmann::json evaluate_task(const io::checkpoint_contents& checkpoint, const task_eval_settings& settings);

void print_task_evaluation(const nlohmann::json& result);

/// The manifest of `prepare --task squad` data (its tokenizer and window sizes); throws
/// troupe::error naming the directory for any other data.
io::dataset_manifest squad_manifest(const std::filesystem::path& data_dir);

/// `model`'s answer to every question, in order: the questions cut into windows as `manifest`'s
/// data was, each window's logits at max_seq_length, the answer search of `answers` (its version
/// and case set from the file and the data).
/// `windows`, when given, receives what the model read and said for every window (troupe
/// predict --json shows them, as HF's models return them).
struct squad_windows {
  std::vector<io::squad_feature> features;
  std::vector<io::squad_window_logits> logits;  ///< at max_seq_length, padding included
};
std::vector<io::squad_answer_prediction> answer_squad(compute::task_inference& model, const io::squad_dataset& questions,
                                                      const io::tokenizer& tokens, const io::dataset_manifest& manifest,
                                                      io::squad_prediction_settings answers, int64_t batch_size,
                                                      squad_windows* windows = nullptr);

}  // namespace troupe::tools
