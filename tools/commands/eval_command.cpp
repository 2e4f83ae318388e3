#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "compute/device_check.hpp"
#include "compute/mlm_evaluation.hpp"
#include "io/checkpoint/checkpoint_store.hpp"
#include "io/data/data_tokenizer.hpp"
#include "io/data/mlm_batch_builder.hpp"
#include "io/text/word_pieces.hpp"
#include "messages/error.hpp"
#include "tools/commands/checkpoint_data.hpp"
#include "tools/commands/commands.hpp"
#include "tools/commands/task_evaluation.hpp"

namespace troupe::tools {
namespace {

struct eval_arguments {
  std::string checkpoint;
  std::string data;
  std::string device = "cpu";
  int64_t max_samples = 0;
  int64_t pseudo_samples = 16;
  int64_t batch_size = 32;
  std::optional<uint64_t> seed;            ///< default: the checkpoint's job seed
  std::optional<double> mask_probability;  ///< default: the checkpoint's data.mask_probability
  bool bf16 = false;
  bool json = false;
  std::string task;                  ///< "squad" or "classify": must be the checkpoint's head
  std::string input;                 ///< squad: the official file to answer
  std::string predictions;           ///< squad: where to write {id: answer}; classify: index<TAB>label
  std::string null_odds;             ///< squad v2.0: where to write {id: null score diff}
  io::squad_prediction_settings answers;
};

double share(int64_t part, int64_t whole) { return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0; }

/// The model's and the unigram baseline's guesses at the masked pieces, as counts.
struct guess_counts {
  compute::top_k_hits pieces, words;
  void add(const compute::mlm_batch& batch, const std::vector<compute::guess_rank>& ranks,
           const std::vector<bool>& continues_word) {
    pieces.add(compute::piece_hits(ranks));
    words.add(compute::whole_word_hits(batch, ranks, continues_word));
  }
};

void add_accuracy(nlohmann::json& result, const std::string& prefix, const guess_counts& counts) {
  result[prefix + "top1_accuracy"] = share(counts.pieces.top1, counts.pieces.counted);
  result[prefix + "top5_accuracy"] = share(counts.pieces.top5, counts.pieces.counted);
  result[prefix + "whole_word_top1_accuracy"] = share(counts.words.top1, counts.words.counted);
  result[prefix + "whole_word_top5_accuracy"] = share(counts.words.top5, counts.words.counted);
}

/// Masked-LM perplexity over the first `max_samples` validation sequences (all by default) with
/// masks keyed by (seed, epoch 0, sample) — the job's seed and mask probability unless given,
/// so that with the run's eval_samples it measures what the run's periodic held-out evaluation
/// measured —, the unigram perplexity of the same predicted tokens, top-1/top-5 accuracy per
/// masked piece and per whole word, and pseudo-perplexity over the first `pseudo_samples`.
nlohmann::json evaluate_masked_lm(const eval_arguments& args, const io::checkpoint_contents& checkpoint) {
  const auto& dir = checkpoint.dir;
  const auto job_data = checkpoint.job.value("data", nlohmann::json::object());
  const auto data_dir = checkpoint_data_dir(args.data, checkpoint).string();
  io::token_dataset validation(data_dir, "validation");
  io::token_dataset train(data_dir, "train");
  if (validation.manifest().vocab_hash != checkpoint.state.vocab_hash)
    throw make_error(data_dir, ": vocabulary ", validation.manifest().vocab_hash, " differs from the checkpoint's ",
                     checkpoint.state.vocab_hash, " (", dir.string(), ")");
  const uint64_t seed = args.seed.value_or(checkpoint.job.value("seed", uint64_t{42}));
  const double mask_probability = args.mask_probability.value_or(job_data.value("mask_probability", 0.15));

  compute::mlm_evaluator evaluator(checkpoint.model, checkpoint.parameters, c10::Device(args.device), args.bf16);
  io::mlm_batch_builder builder(validation, mask_probability, seed);
  const auto counts = io::count_tokens(train);
  const uint64_t samples = args.max_samples > 0 ? std::min<uint64_t>(args.max_samples, validation.size())
                                                : validation.size();
  const auto& specials = validation.manifest().specials;
  const std::vector<int64_t> special_ids{specials.pad, specials.cls, specials.sep, specials.mask};
  const auto continues_word = io::word_continuations(
      validation.manifest().tokenizer_kind, io::open_data_tokenizer(validation.manifest(), data_dir)->pieces(), special_ids);
  const auto unigram_guesses = compute::unigram_top5(counts, special_ids);
  const bool sentence_order = validation.manifest().sentence_order && checkpoint.model.model_type == "albert";
  compute::nll_sum model_nll, unigram;
  guess_counts model_guessed, unigram_guessed;
  int64_t order_correct = 0;
  for (uint64_t start = 0; start < samples; start += static_cast<uint64_t>(args.batch_size)) {
    std::vector<compute::sample_ref> refs;
    for (uint64_t i = start; i < std::min<uint64_t>(samples, start + args.batch_size); ++i) refs.push_back({0, i});
    auto batch = builder.build(refs);
    std::vector<compute::guess_rank> ranks;
    model_nll.add(evaluator.masked_lm(batch, sentence_order ? &order_correct : nullptr, &ranks));
    model_guessed.add(batch, ranks, continues_word);
    unigram.add(compute::unigram_nll(counts, batch.labels));
    unigram_guessed.add(batch, compute::unigram_ranks(unigram_guesses, batch.labels), continues_word);
  }

  compute::nll_sum pseudo;
  const uint64_t pseudo_samples = std::min<uint64_t>(static_cast<uint64_t>(args.pseudo_samples), validation.size());
  for (uint64_t i = 0; i < pseudo_samples; ++i) {
    auto [tokens, types] = io::sequence_tensors(validation, i);
    pseudo.add(evaluator.pseudo_log_likelihood(tokens, types, validation.sequence(i).length, specials.mask, special_ids,
                                               args.batch_size * 2));
  }

  nlohmann::json result = {{"checkpoint", dir.string()},
                           {"step", checkpoint.state.optimizer_steps},
                           {"data", data_dir},
                           {"validation_sequences", samples},
                           {"mask_seed", seed},
                           {"mask_probability", mask_probability},
                           {"masked_tokens", model_nll.tokens},
                           {"masked_words", model_guessed.words.counted},
                           {"mlm_loss", model_nll.mean()},
                           {"perplexity", model_nll.perplexity()},
                           {"unigram_perplexity", unigram.perplexity()},
                           {"accuracy_counts",
                            "top*_accuracy: each masked sub-word piece once; whole_word_top*_accuracy: each word with "
                            "a masked piece once, right when every masked piece of it is"}};
  add_accuracy(result, "", model_guessed);
  add_accuracy(result, "unigram_", unigram_guessed);
  if (sentence_order) result["sop_accuracy"] = static_cast<double>(order_correct) / static_cast<double>(samples);
  if (pseudo.tokens > 0) {
    result["pseudo_perplexity"] = pseudo.perplexity();
    result["pseudo_perplexity_sequences"] = pseudo_samples;
    result["pseudo_perplexity_tokens"] = pseudo.tokens;
  }
  return result;
}

/// A fine-tuned checkpoint gets its task's scores, a pretrained one the masked-LM's.
nlohmann::json evaluate(const eval_arguments& args) {
  compute::check_device(args.device, "--device");
  auto dir = io::resolve_checkpoint(args.checkpoint, args.checkpoint);
  auto checkpoint = io::load_checkpoint(dir, /*with_optimizer=*/false);
  checkpoint.dir = dir;
  const std::string head = !checkpoint.task ? ""
                           : checkpoint.task->type == compute::task_type::question_answering ? "squad"
                                                                                              : "classify";
  if (!args.task.empty() && args.task != head)
    throw make_error("--task ", args.task, ": ", dir.string(), " is ",
                     head.empty() ? "a pretrained model without a task head (leave --task out for its masked-LM scores)"
                                  : "a fine-tuned " + head + " model (--task " + head + ")");
  if (head.empty()) return evaluate_masked_lm(args, checkpoint);
  task_eval_settings settings;
  settings.data_dir = checkpoint_data_dir(args.data, checkpoint);
  settings.squad_file = args.input;
  settings.predictions = args.predictions;
  settings.null_odds = args.null_odds;
  settings.device = args.device;
  settings.bf16 = args.bf16;
  settings.batch_size = args.batch_size;
  settings.max_samples = args.max_samples;
  settings.answers = args.answers;
  io::check_squad_prediction_settings(settings.answers);
  return evaluate_task(checkpoint, settings);
}

void print_evaluation(const nlohmann::json& result) {
  if (result.contains("task")) return print_task_evaluation(result);
  const auto percent = [&](const std::string& key) { return 100 * result[key].get<double>(); };
  std::printf("checkpoint          %s (step %lld)\n", result["checkpoint"].get<std::string>().c_str(),
              static_cast<long long>(result["step"].get<int64_t>()));
  std::printf("held-out            %llu validation sequences: %lld masked pieces in %lld words (masks of seed %llu, "
              "%.0f%%)\n",
              static_cast<unsigned long long>(result["validation_sequences"].get<uint64_t>()),
              static_cast<long long>(result["masked_tokens"].get<int64_t>()),
              static_cast<long long>(result["masked_words"].get<int64_t>()),
              static_cast<unsigned long long>(result["mask_seed"].get<uint64_t>()), percent("mask_probability"));
  std::printf("perplexity          %.1f (loss %.4f); a unigram model of the same tokens: %.1f (model %.2fx)\n",
              result["perplexity"].get<double>(), result["mlm_loss"].get<double>(),
              result["unigram_perplexity"].get<double>(),
              result["perplexity"].get<double>() / result["unigram_perplexity"].get<double>());
  std::printf("masked pieces right %.1f%% first guess, %.1f%% in the top 5 (unigram: %.1f%%, %.1f%%)\n",
              percent("top1_accuracy"), percent("top5_accuracy"), percent("unigram_top1_accuracy"),
              percent("unigram_top5_accuracy"));
  std::printf("masked words right  %.1f%% first guess, %.1f%% in the top 5 (unigram: %.1f%%, %.1f%%; a word is right "
              "when every masked piece of it is)\n",
              percent("whole_word_top1_accuracy"), percent("whole_word_top5_accuracy"),
              percent("unigram_whole_word_top1_accuracy"), percent("unigram_whole_word_top5_accuracy"));
  if (result.contains("sop_accuracy"))
    std::printf("sentence order      %.1f%% right (ALBERT SOP, chance 50%%)\n", percent("sop_accuracy"));
  if (result.contains("pseudo_perplexity"))
    std::printf("pseudo-perplexity   %.1f over %lld tokens\n", result["pseudo_perplexity"].get<double>(),
                static_cast<long long>(result["pseudo_perplexity_tokens"].get<int64_t>()));
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto args = std::make_shared<eval_arguments>();
  auto* command = app.add_subcommand("eval", "masked-LM perplexity, pseudo-perplexity and the unigram baseline; a fine-tuned model's task scores (SQuAD exact match/F1, accuracy/F1)");
  command->add_option("checkpoint,--checkpoint", args->checkpoint, "checkpoint directory or run directory")->required();
  command->add_option("--data", args->data, "data directory (default: the checkpoint's data.dir)");
  command->add_option("--device", args->device, "cpu or cuda:N")->capture_default_str();
  command->add_option("--max-samples", args->max_samples,
                      "the first N validation sequences for perplexity (0: all; the job's eval_samples measures what "
                      "its periodic held-out evaluation did)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--pseudo-samples", args->pseudo_samples, "sequences scored for pseudo-perplexity")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_option("--batch-size", args->batch_size, "sequences per forward pass")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--seed", args->seed, "seed of the evaluation masks (default: the job's seed, as its held-out "
                                            "evaluation)");
  command->add_option("--mask-probability", args->mask_probability,
                      "share of tokens masked (default: the job's data.mask_probability)")
      ->check(CLI::Range(0.01, 0.9));
  command->add_flag("--bf16", args->bf16, "run the model under bf16 autocast");
  command->add_flag("--json", args->json, "print one JSON object");
  command->add_option("--task", args->task, "a fine-tuned model's task (squad or classify; default: the checkpoint's)")
      ->check(CLI::IsMember({"squad", "classify"}));
  command->add_option("--input", args->input, "squad: the SQuAD v1.1/v2.0 file to answer and score (e.g. dev-v1.1.json)");
  command->add_option("--predictions", args->predictions,
                      "squad: write the official predictions file {id: answer}; classify: run_glue.py's "
                      "predict_results file (index<TAB>prediction)");
  command->add_option("--null-odds", args->null_odds,
                      "squad v2.0: write null_odds.json {id: null score - best span score} (evaluate-v2.0.py's "
                      "--na-prob-file)");
  command->add_option("--n-best-size", args->answers.n_best_size, "squad: start and end candidates per window")
      ->capture_default_str();
  command->add_option("--max-answer-length", args->answers.max_answer_length, "squad: longest answer in pieces")
      ->capture_default_str();
  command->add_option("--null-score-diff-threshold", args->answers.null_score_diff_threshold,
                      "squad v2.0: answer \"\" when the null score beats the best span by more than this")
      ->capture_default_str();
  command->callback([args] {
    auto result = evaluate(*args);
    if (args->json) {
      std::printf("%s\n", result.dump().c_str());
      return;
    }
    print_evaluation(result);
  });
}

}  // namespace troupe::tools
